"""Question sets' own formats: answer letters and positions, the versioned normalisations of
exact answers, the published lists of choices, and the content key rows are matched by."""

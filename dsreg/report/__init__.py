"""L6 reports: evaluate, diff, cite, plot."""

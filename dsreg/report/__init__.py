"""Reports on revisions: accuracy of model predictions per view, diffs, citations, rank plots."""

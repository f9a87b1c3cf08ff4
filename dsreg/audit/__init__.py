"""Duplicates and train-test contamination: fingerprints, exact candidate indexes, the audit."""

"""Duplicates and train-test contamination: fingerprints, exact candidate indexes, the audit.

The audit's default thresholds live here, beside no import, so that the library function and
the command line state them as their defaults without importing numpy (docs/audit.md measures
both)."""

#: Hamming bits (of 64) within which two images are near-duplicates: docs/audit.md.
DEFAULT_IMAGE_THRESHOLD = 10
#: Shingle Jaccard similarity from which two texts are near-duplicates: docs/audit.md.
DEFAULT_TEXT_THRESHOLD = 0.3
#: The tiers of a match, best first: a row's matches and the findings are ordered by them.
TIERS = ("exact", "image", "text", "ngram")

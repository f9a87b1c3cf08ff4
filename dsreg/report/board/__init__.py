"""Recorded results scored: ``figures`` turns one revision's row patterns into accuracies,
intervals, ranks, rank intervals and pairwise tests; ``leaderboard`` scores every recorded
model on every tagged revision; ``gap`` compares two test sets of one task; ``cite`` cites one
result; ``plot`` draws the leaderboard's ranks and the gap's accuracies.
"""

"""Uncertainty and significance of accuracies: the closed forms and the pattern bootstrap
(``core``), models' correctness on several views counted as patterns (``counts``), the figures
of a set of models on those views (``significance``), and the rows of ``dsreg eval`` counted
for them (``rowscores``). Each name is imported from its module; the package re-exports none,
so that each list of names is kept in one place.

``significance`` is the entry point for a caller with per-view correctness of its models:
feed a :class:`~counts.CorrectnessCounter` chunks of rows, then call :func:`significance` on
its :meth:`~counts.CorrectnessCounter.correctness` with :class:`StatsOptions`.
"""

"""Models' top-1 correctness on several views of one set of rows, counted as patterns.

The input is each model's correctness on each view, row by row: a ``(rows, models)`` array per
view, 1 where the model is right, 0 where it is wrong and -1 where the view does not serve the
row (:meth:`CorrectnessCounter.add`), or, from a caller that builds them so, which rows each
view serves and which of them each model gets right (:class:`ViewFlags`). The arrays of all
views share their rows (the snapshot's), so one bootstrap resample of the rows resamples every
view at once. Rows are counted as patterns (:class:`~dsreg.report.stats.core.PatternCounter`),
which is exact and costs the number of distinct patterns, not of rows; what
:func:`~dsreg.report.stats.significance.significance` measures is computed from them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dsreg.errors import InvalidInputError
from dsreg.report.stats.core import PatternCounter, Patterns

__all__ = ["Correctness", "CorrectnessCounter", "ViewFlags"]


@dataclass(frozen=True, slots=True)
class Correctness:
    """Rows as patterns of features: for view i, column ``i * (M + 1)`` says the view serves
    the row and column ``i * (M + 1) + 1 + m`` that model m is right there (0 outside it)."""

    views: tuple[str, ...]
    models: tuple[str, ...]
    patterns: Patterns

    def served(self, v: int) -> int:
        return v * (len(self.models) + 1)

    def right(self, v: int, m: int) -> int:
        return v * (len(self.models) + 1) + 1 + m


@dataclass(frozen=True, slots=True)
class ViewFlags:
    """A chunk of rows on every view: ``served[view]`` says which rows the view serves
    ((rows,) bool), ``right[view]`` which each model gets right there ((rows, models) bool;
    read only where the view serves the row)."""

    served: dict[str, np.ndarray]
    right: dict[str, np.ndarray]


class CorrectnessCounter:
    """Counts per-view correctness given in chunks of rows (:meth:`add`), without keeping them."""

    def __init__(self, views: Sequence[str], models: Sequence[str]) -> None:
        if len(set(views)) != len(views) or len(set(models)) != len(models):
            raise InvalidInputError("view names and model names must each be distinct")
        self.views, self.models = tuple(views), tuple(models)
        self._counter = PatternCounter(len(views) * (len(models) + 1))

    def add(self, chunk: Mapping[str, np.ndarray], counts: np.ndarray | None = None) -> None:
        """One chunk of rows: for every view, a ``(rows, models)`` array of 1 (right), 0 (wrong)
        and -1 (the view does not serve the row); the same rows in every view. ``counts``: how
        many rows each row given stands for (default one)."""
        missing = [v for v in self.views if v not in chunk]
        if missing:
            raise InvalidInputError(f"correctness of views {missing} is missing")
        n = len(chunk[self.views[0]])
        m = len(self.models)
        columns: list[np.ndarray] = []
        for v in self.views:
            c = np.asarray(chunk[v])
            if c.shape != (n, m):
                raise InvalidInputError(
                    f"correctness of view {v!r} has shape {c.shape}; expected "
                    f"({n}, {m}) (rows, models)"
                )
            if c.size and (c.min() < -1 or c.max() > 1):
                raise InvalidInputError(f"correctness of view {v!r} holds values outside -1, 0, 1")
            served: np.ndarray
            if m == 1:
                served = np.asarray(c[:, 0] >= 0)
            elif m:
                some = c >= 0
                served = np.asarray(some.all(axis=1))
                if not np.array_equal(served, some.any(axis=1)):
                    raise InvalidInputError(f"view {v!r}: a row is served to some models only")
            else:
                served = np.zeros(n, bool)
            columns.append(served)
            columns.extend(c[:, j] > 0 for j in range(m))
        self._counter.add_columns(columns, counts, rows=n)

    def add_views(self, chunk: ViewFlags, counts: np.ndarray | None = None) -> None:
        """As :meth:`add`, the chunk given as its rows' served and right flags (not checked:
        for a caller that builds them so)."""
        n = len(chunk.served[self.views[0]])
        columns: list[np.ndarray] = []
        for v in self.views:
            served = chunk.served[v]
            columns.append(served)
            right = chunk.right[v]
            columns.extend(right[:, j] & served for j in range(len(self.models)))
        self._counter.add_columns(columns, counts, rows=n)

    def update(self, other: CorrectnessCounter) -> None:
        """Add the rows another counter (of the same views and models) counted."""
        if (other.views, other.models) != (self.views, self.models):
            raise ValueError("only counters of the same views and models add up")
        self._counter.update(other._counter)

    def correctness(self) -> Correctness:
        return Correctness(self.views, self.models, self._counter.patterns())

"""How two correction sets of one snapshot agree (``dsreg diff A B`` when A and B name different
overlays): a verdict-by-verdict table, the rows both call errors, and, for rows both relabel,
how often their suggested labels agree; where one side gives label sets (ImageNet-ReaL), how
often the other side's suggested label is in the set. Work in the size of the corrections."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dsreg._util.records import FieldDict, field_dict
from dsreg.formats.manifests import VERDICTS
from dsreg.views.sparse import Named, in_label_sets, union_rows

__all__ = ["Agreement", "VerdictPair", "compare_corrections"]

_NOT_ERRORS = (0, VERDICTS.index("non_error") + 1, VERDICTS.index("unreviewed") + 1)
_RELABEL = (VERDICTS.index("suspected") + 1, VERDICTS.index("correctable") + 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class VerdictPair(FieldDict):
    """How many rows A's overlays give verdict ``a`` and B's give ``b`` (None: no overlay names
    the row on that side)."""

    a: str | None
    b: str | None
    rows: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Agreement:
    """The two sides' corrections compared at the rows either names.

    ``both_errors``: rows both call an error (any verdict but ``non_error`` and
    ``unreviewed``). ``both_relabel``: rows both relabel (``correctable`` or ``suspected``
    with a suggested label); ``same_suggestion``: of those, how many suggest the same label.
    ``a_in_b_labels``: (rows A relabels where B gives a label set, of which A's suggestion is
    in B's set); ``b_in_a_labels`` the other way round."""

    named_a: int
    named_b: int
    named_both: int
    verdicts: tuple[VerdictPair, ...]
    both_errors: int
    both_relabel: int
    same_suggestion: int
    a_in_b_labels: tuple[int, int]
    b_in_a_labels: tuple[int, int]

    def to_dict(self) -> dict[str, Any]:
        return field_dict(
            self,
            verdicts=[v.to_dict() for v in self.verdicts],
            a_in_b_labels={"rows": self.a_in_b_labels[0], "agree": self.a_in_b_labels[1]},
            b_in_a_labels={"rows": self.b_in_a_labels[0], "agree": self.b_in_a_labels[1]},
        )


def _at(named: np.ndarray, side: Named) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """At each of ``named`` (sorted): the side's verdict code (0: none), suggested label (-1:
    none) and label-set index (-1: none)."""
    code = np.zeros(len(named), dtype=np.int64)
    sug = np.full(len(named), -1, dtype=np.int64)
    sets = np.full(len(named), -1, dtype=np.int64)
    if not len(side.named):
        return code, sug, sets
    pos = np.minimum(np.searchsorted(side.named, named), len(side.named) - 1)
    hit = side.named[pos] == named
    code[hit] = side.verdict[pos[hit]]
    sug[hit] = side.suggested[pos[hit]]
    if len(side.set_index) == len(side.named):
        sets[hit] = side.set_index[pos[hit]]
    return code, sug, sets


def _in_other(
    sug: np.ndarray, relabel: np.ndarray, sets: np.ndarray, other: Named
) -> tuple[int, int]:
    take = relabel & (sets >= 0)
    hits = in_label_sets(sug[take], sets[take], other.sets)
    return int(take.sum()), int(hits.sum())


def compare_corrections(a: Named, b: Named) -> Agreement:
    """Compare the merged corrections of two revisions of one snapshot."""
    named = union_rows(a.named, b.named)
    ca, sa, la = _at(named, a)
    cb, sb, lb = _at(named, b)
    m = len(VERDICTS) + 1
    pairs = np.bincount(ca * m + cb, minlength=m * m)
    names: list[str | None] = [None, *VERDICTS]
    verdicts = tuple(
        VerdictPair(a=names[int(c) // m], b=names[int(c) % m], rows=int(pairs[c]))
        for c in np.flatnonzero(pairs)
    )
    err_a = ~np.isin(ca, _NOT_ERRORS)
    err_b = ~np.isin(cb, _NOT_ERRORS)
    rel_a = np.isin(ca, _RELABEL) & (sa >= 0)
    rel_b = np.isin(cb, _RELABEL) & (sb >= 0)
    both = rel_a & rel_b
    return Agreement(
        named_a=len(a.named),
        named_b=len(b.named),
        named_both=int(((ca != 0) & (cb != 0)).sum()),
        verdicts=tuple(sorted(verdicts, key=lambda v: -v.rows)),
        both_errors=int((err_a & err_b).sum()),
        both_relabel=int(both.sum()),
        same_suggestion=int((both & (sa == sb)).sum()),
        a_in_b_labels=_in_other(sa, rel_a, lb, b),
        b_in_a_labels=_in_other(sb, rel_b, la, a),
    )

"""The view rule, applied to the rows overlays name only (the evaluator's form).

A view of a snapshot differs from "every row, given labels" only at rows some overlay names, so
it is kept as few rows: every row except ``rows`` (original, cleaned, corrected) or only ``rows``
(honeypot), with ``relabel`` rows served their suggested label. ``dsreg eval`` scores 50 million
rows and ``dsreg diff`` compares two revisions of one snapshot with work in the size of the
corrections, not of the snapshot.

This is one of three implementations of the rule side by side: ``dsreg.views.rule`` (numpy over
every row, the reference: ``merge_overlays``/``apply_view``) and ``dsreg.views.sql`` (DuckDB) are
the others; ``tests/views/test_rule_parity.py`` holds the three equal.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dsreg._util.parallel import default_jobs
from dsreg.errors import InvalidInputError, ManifestError
from dsreg.formats.corrections import LABEL_SET_VERSIONS
from dsreg.formats.manifests import AUDIT_VERDICTS, VERDICTS, VIEWS, Revision, Snapshot, View
from dsreg.formats.tables import as_numpy
from dsreg.objects.digest import short
from dsreg.registry.folder import Registry
from dsreg.views.verified import verified_object

__all__ = [
    "LabelColumn",
    "LoadedRevision",
    "Named",
    "SparseView",
    "in_label_sets",
    "labels_at",
    "load_corrections",
    "load_revision",
    "merge",
    "read_column",
    "read_columns",
    "sparse_views",
    "union_rows",
    "view_rows",
]

#: Rows of the label column ``labels_at`` decodes at a time.
LABELS_BATCH = 1 << 20

_NON_ERROR = VERDICTS.index("non_error") + 1
_CORRECTABLE = VERDICTS.index("correctable") + 1
_SUSPECTED = VERDICTS.index("suspected") + 1
_NEITHER = VERDICTS.index("neither") + 1
_MULTI_LABEL = VERDICTS.index("multi_label") + 1
_AUDITED = np.array([VERDICTS.index(v) + 1 for v in AUDIT_VERDICTS], dtype=np.uint8)
_UNREVIEWED = VERDICTS.index("unreviewed") + 1


def _none() -> np.ndarray:
    return np.empty(0, dtype=np.int64)


@dataclass(frozen=True, slots=True, kw_only=True)
class SparseView:
    """A view as few rows: every snapshot row except ``rows`` (``complement``) or only ``rows``;
    ``relabel`` (sorted, served rows) take the suggested label, at ``relabel_cand`` of the
    target's candidate rows."""

    name: View
    complement: bool
    rows: np.ndarray
    relabel: np.ndarray
    relabel_cand: np.ndarray
    size: int
    # multilabel: served rows whose last overlay gives a ``labels`` list (sorted), each one's
    # index into ``Named.sets``, and (relabelled ones) its candidate index, else -1; and the
    # ``multi_label`` rows whose last overlay gives no list but a suggested label (sorted),
    # each one's candidate index: their ``labels`` is the given and the suggested label. Any
    # other row's ``labels`` is its served label alone.
    set_rows: np.ndarray = field(default_factory=_none)
    set_index: np.ndarray = field(default_factory=_none)
    set_cand: np.ndarray = field(default_factory=_none)
    pair_rows: np.ndarray = field(default_factory=_none)
    pair_cand: np.ndarray = field(default_factory=_none)

    def served(self, n: int) -> np.ndarray:
        """The served rows, in snapshot order (materialised: for tests and error messages)."""
        if not self.complement:
            return self.rows
        keep = np.ones(n, dtype=bool)
        keep[self.rows] = False
        return np.flatnonzero(keep)


@dataclass(frozen=True, slots=True, kw_only=True)
class Named:
    """The rows overlays name, each with the verdict and suggested label of the last overlay
    naming it (``rule.Merged``, sparse)."""

    named: np.ndarray  # int64, sorted: every row an overlay names
    verdict: np.ndarray  # uint8 code (1 + index in VERDICTS) of the last overlay naming it
    suggested: np.ndarray  # int32, -1 where that overlay suggests none
    # Where that overlay gives ``labels`` / ``label_counts``: an index into ``sets`` /
    # ``counts`` (every overlay's column, concatenated), -1 where it gives none.
    set_index: np.ndarray = field(default_factory=_none)
    sets: pa.ListArray | None = None
    count_index: np.ndarray = field(default_factory=_none)
    counts: pa.ListArray | None = None


def _verdict_codes(col: pa.ChunkedArray) -> np.ndarray:
    """Verdict strings as codes (1 + index in VERDICTS), one lookup per distinct verdict; the
    column may be read dictionary-encoded (as Parquet stores it) or as plain strings."""
    out = []
    for chunk in col.chunks:
        enc = chunk if pa.types.is_dictionary(chunk.type) else chunk.dictionary_encode()
        names = enc.dictionary.to_pylist()
        unknown = sorted(set(names) - set(VERDICTS))
        if unknown or enc.indices.null_count:
            raise ManifestError(
                f"a corrections table holds verdicts {unknown or [None]} outside "
                f"{list(VERDICTS)}; run 'dsreg verify'"
            )
        lut = np.asarray([VERDICTS.index(v) + 1 for v in names], dtype=np.uint8)
        out.append(lut[as_numpy(enc.indices)])
    return out[0] if len(out) == 1 else np.concatenate(out) if out else np.empty(0, np.uint8)


def _lists(t: pa.Table, name: str, offset: int) -> tuple[np.ndarray | None, pa.Array | None]:
    """Indices (``offset`` + position, -1 where null) into a table's list column ``name``;
    ``None`` for both if it has no such column."""
    if name not in t.column_names:
        return None, None
    col = t.column(name).combine_chunks()
    has = as_numpy(col.is_valid())
    return np.where(has, offset + np.arange(len(col), dtype=np.int64), -1), col


def _index(parts: list[np.ndarray | None], rows: list[np.ndarray]) -> np.ndarray:
    """The tables' list indices end to end (-1 for a table without the column); empty when
    no table has one (readers take a short index as none): not a -1 for each named row, 8
    bytes a row (40 MB at 5 million corrections)."""
    if all(p is None for p in parts):
        return _none()
    return np.concatenate(
        [
            np.full(len(r), -1, np.int64) if p is None else p
            for p, r in zip(parts, rows, strict=True)
        ]
    )


def merge(tables: Sequence[pa.Table]) -> Named:
    """Fold corrections in order, the later overlay winning: ``rule.merge_overlays``, kept
    sparse (no array of the snapshot's size) and vectorised (one verdict lookup per table).
    The winning row's ``labels`` and ``label_counts`` come with it (version 2 tables)."""
    rows, codes, sugg = [], [], []
    si: list[np.ndarray | None] = []
    ci: list[np.ndarray | None] = []
    sets: list[pa.Array] = []
    counts: list[pa.Array] = []
    n_sets = n_counts = 0
    for t in tables:
        rows.append(as_numpy(t.column("row")).astype(np.int64, copy=False))
        codes.append(_verdict_codes(t.column("verdict")))
        sugg.append(as_numpy(t.column("suggested_label"), fill=-1).astype(np.int32, copy=False))
        idx, col = _lists(t, "labels", n_sets)
        si.append(idx)
        if col is not None:
            sets.append(col)
            n_sets += len(col)
        idx, col = _lists(t, "label_counts", n_counts)
        ci.append(idx)
        if col is not None:
            counts.append(col)
            n_counts += len(col)
    if not tables:
        return Named(
            named=np.empty(0, np.int64),
            verdict=np.empty(0, np.uint8),
            suggested=np.empty(0, np.int32),
        )
    r, c, s = (x[0] if len(x) == 1 else np.concatenate(x) for x in (rows, codes, sugg))
    a, b = _index(si, rows), _index(ci, rows)
    if len(r) > 1 and not (r[1:] > r[:-1]).all():
        # A stable sort keeps overlay order among equal rows: the last of each run wins.
        order = np.argsort(r, kind="stable")
        r, c, s = r[order], c[order], s[order]
        a, b = (x[order] if len(x) else x for x in (a, b))
        last = np.ones(len(r), dtype=bool)
        last[:-1] = r[1:] != r[:-1]
        r, c, s = r[last], c[last], s[last]
        a, b = (x[last] if len(x) else x for x in (a, b))
    return Named(
        named=r,
        verdict=c,
        suggested=s,
        set_index=a,
        sets=pa.concat_arrays(sets) if sets else None,
        count_index=b,
        counts=pa.concat_arrays(counts) if counts else None,
    )


def in_label_sets(labels: np.ndarray, index: np.ndarray, sets: pa.ListArray | None) -> np.ndarray:
    """Whether ``labels[j]`` is in ``sets[index[j]]``, for every j (vectorised: one pass over
    the lists' values; ``index`` must be >= 0)."""
    out = np.zeros(len(labels), dtype=bool)
    if sets is None or not len(labels):
        return out
    offsets = as_numpy(sets.offsets).astype(np.int64)
    values = as_numpy(sets.values).astype(np.int64, copy=False)
    start, lengths = offsets[index], offsets[index + 1] - offsets[index]
    parent = np.repeat(np.arange(len(labels)), lengths)
    within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    hit = values[np.repeat(start, lengths) + within] == np.asarray(labels, np.int64)[parent]
    out[parent[hit]] = True
    return out


def _pick(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``values[mask]``: ``np.compress``, twice as fast as a boolean index on millions."""
    return np.compress(mask, values)


def sparse_views(n: int, ov: Named, names: Iterable[View]) -> dict[View, SparseView]:
    """Each view of ``names`` over ``n`` snapshot rows, from the rows overlays name (``ov``)."""
    v, s, rows = ov.verdict, ov.suggested, ov.named
    has = s >= 0  # the target's candidate rows, in order
    audited = np.isin(v, _AUDITED)
    err = (v != _NON_ERROR) & (v != _UNREVIEWED) & ~audited
    relabel = ((v == _CORRECTABLE) | (v == _SUSPECTED)) & has

    def cand(mask: np.ndarray) -> np.ndarray:
        """The candidate indices of the rows ``mask`` picks (candidates all)."""
        return np.flatnonzero(_pick(mask, has))

    def served_except(
        name: View, drop: np.ndarray | None, relabelled: np.ndarray | None, **label_sets: np.ndarray
    ) -> SparseView:
        dropped = _none() if drop is None else _pick(rows, drop)
        return SparseView(
            name=name,
            complement=True,
            rows=dropped,
            relabel=_none() if relabelled is None else _pick(rows, relabelled),
            relabel_cand=_none() if relabelled is None else cand(relabelled),
            size=n - len(dropped),
            **label_sets,
        )

    out: dict[View, SparseView] = {}
    for name in names:
        if name == "original":
            out[name] = served_except(name, None, None)
        elif name == "cleaned":
            out[name] = served_except(name, err, None)
        elif name == "decontaminated":
            # The rows an audit named left out, none relabelled.
            out[name] = served_except(name, audited, None)
        elif name == "corrected":
            out[name] = served_except(name, err & ~relabel, relabel)
        elif name == "multilabel":
            sets = _multilabel_sets(ov, relabel, cand)
            out[name] = served_except(name, v == _NEITHER, relabel, **sets)
        elif name == "honeypot":
            take = (v == _CORRECTABLE) & has
            served = _pick(rows, take)
            out[name] = SparseView(
                name=name,
                complement=False,
                rows=served,
                relabel=served,
                relabel_cand=cand(take),
                size=len(served),
            )
        else:
            raise InvalidInputError(f"unknown view {name!r}; choose from {', '.join(VIEWS)}")
    return out


def _multilabel_sets(
    ov: Named, relabel: np.ndarray, cand: Callable[[np.ndarray], np.ndarray]
) -> dict[str, np.ndarray]:
    """The multilabel view's ``set_*`` and ``pair_*`` fields of :class:`SparseView`
    (``cand``: the candidate indices of the rows a mask picks)."""
    v, s, rows = ov.verdict, ov.suggested, ov.named
    si = ov.set_index if len(ov.set_index) == len(rows) else np.full(len(rows), -1)
    listed = (si >= 0) & (v != _NEITHER)
    pair = (si < 0) & (v == _MULTI_LABEL) & (s >= 0)
    set_cand = np.full(int(listed.sum()), -1, dtype=np.int64)
    set_cand[_pick(relabel, listed)] = cand(relabel & listed)
    return {
        "set_rows": _pick(rows, listed),
        "set_index": _pick(si, listed),
        "set_cand": set_cand,
        "pair_rows": _pick(rows, pair),
        "pair_cand": cand(pair),
    }


def union_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted union of two sorted arrays of distinct rows: a merge, linear in the rows
    (``np.union1d`` sorts the concatenation from scratch, ignoring that both halves are
    sorted)."""
    if np.array_equal(a, b):
        return a
    c = np.concatenate([a, b])
    c.sort(kind="stable")  # two sorted runs: timsort merges them in linear time
    keep = np.ones(len(c), dtype=bool)
    keep[1:] = c[1:] != c[:-1]
    return c[keep]


def view_rows(n: int, corrections: Sequence[pa.Table], view: View) -> tuple[np.ndarray, np.ndarray]:
    """(served rows, rows served the suggested label) of ``view``: what ``evaluate`` scores."""
    vw = sparse_views(n, merge(corrections), [view])[view]
    return vw.served(n), vw.relabel


def read_columns(
    path: Path, columns: list[str], *, dictionary: Sequence[str] = (), threads: int = 1
) -> pa.Table:
    """Columns of a verified Parquet object (``ParquetFile``: no pyarrow.dataset, no pandas).
    With ``threads`` above 1, its row groups are read in that many runs, one a thread (pyarrow
    decodes without the GIL), the runs' chunks end to end, in order."""
    try:
        pf = pq.ParquetFile(path, read_dictionary=list(dictionary))
        runs = min(threads, pf.metadata.num_row_groups)
        if runs <= 1:
            return pf.read(columns=columns)
        bounds = np.linspace(0, pf.metadata.num_row_groups, runs + 1).astype(int).tolist()

        def run(lo: int, hi: int) -> pa.Table:
            part = pq.ParquetFile(path, read_dictionary=list(dictionary))
            return part.read_row_groups(range(lo, hi), columns=columns, use_threads=False)

        with ThreadPoolExecutor(max_workers=runs) as pool:
            return pa.concat_tables(list(pool.map(run, bounds[:-1], bounds[1:])))
    except (pa.ArrowException, OSError) as e:
        raise ManifestError(f"cannot read {columns} from {path}: {e}; run 'dsreg verify'") from e


def read_column(path: Path, column: str) -> pa.ChunkedArray:
    return read_columns(path, [column]).column(column)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedRevision:
    """What the view rule needs of a revision: the snapshot's labels and the merged overlays."""

    labels: LabelColumn
    classes: tuple[str, ...]
    merged: Named
    overlays: tuple[tuple[str, str], ...]  # (digest, kind)
    examples: Path  # the verified examples table, for columns read later (ids)


def load_revision(reg: Registry, revision: Revision) -> LoadedRevision:
    """Verify a revision's snapshot and overlays; read the overlays' corrections. Its callers
    (``eval``, ``leaderboard``) score every row, so the labels are decoded on a thread of their
    own while the overlays are read and merged (:meth:`LabelColumn.prefetch`): the overlays'
    work runs on one core, and the labels would otherwise wait for it."""
    snap = reg.snapshot(revision.snapshot)
    path = verified_object(reg, snap.examples)
    labels = LabelColumn(path, snap)
    labels.prefetch()
    overlays = [(d, reg.overlay(d)) for d in revision.overlays]
    cpaths = [verified_object(reg, ov.corrections) for _, ov in overlays]
    versions = [ov.version for _, ov in overlays]
    if len(cpaths) == 1:  # one table: its row groups split between the cores
        tables = [_read_overlay(cpaths[0], versions[0], threads=default_jobs())]
    else:
        with ThreadPoolExecutor(max_workers=2) as pool:  # pyarrow decodes without the GIL
            tables = list(pool.map(_read_overlay, cpaths, versions))
    return LoadedRevision(
        labels=labels,
        classes=snap.classes,
        merged=merge(tables),
        overlays=tuple((d, ov.kind) for d, ov in overlays),
        examples=path,
    )


def load_corrections(reg: Registry, revision: Revision) -> Named:
    """A revision's overlays merged, each corrections table verified first: ``load_revision``
    without the snapshot's labels (``dsreg diff`` reads those at the named rows only)."""
    overlays = [reg.overlay(d) for d in revision.overlays]
    return merge(
        [_read_overlay(verified_object(reg, ov.corrections), ov.version) for ov in overlays]
    )


def labels_at(reg: Registry, snap: Snapshot, rows: np.ndarray) -> np.ndarray:
    """The snapshot's labels at ``rows`` (sorted), its examples table verified, then read a
    batch at a time: memory in the size of ``rows``, not of the snapshot."""
    path = verified_object(reg, snap.examples)
    out = np.empty(len(rows), dtype=np.int32)
    start = 0
    try:
        pf = pq.ParquetFile(path)
        batches = pf.iter_batches(batch_size=LABELS_BATCH, columns=["label"], use_threads=False)
        for batch in batches:
            m = batch.num_rows
            lo, hi = np.searchsorted(rows, [start, start + m])
            if hi > lo:
                out[lo:hi] = as_numpy(batch.column(0))[rows[lo:hi] - start]
            start += m
    except (pa.ArrowException, OSError) as e:
        raise ManifestError(f"cannot read the labels of {path}: {e}; run 'dsreg verify'") from e
    if start != snap.rows:
        raise ManifestError(_rows_differ(snap.examples, start, snap.rows))
    return out


class LabelColumn:
    """A snapshot's labels, the ``label`` column of its verified examples table. A caller that
    goes over the rows once, in order, takes them a row group at a time (``groups``, then
    ``column[group]``: no array of the snapshot's size, 100 MB at 50 million rows); any other
    read (a second pass, rows at other positions) decodes the column whole, once, into an array
    of the narrowest type its classes fit (int16 below 32,768 classes), which is kept. A caller
    that will read every row after other work has it decoded whole ahead (:meth:`prefetch`)."""

    def __init__(self, path: Path, snap: Snapshot) -> None:
        try:
            meta = pq.ParquetFile(path).metadata
        except (pa.ArrowException, OSError) as e:
            raise ManifestError(f"cannot read {path}: {e}; run 'dsreg verify'") from e
        if meta.num_rows != snap.rows:
            raise ManifestError(_rows_differ(snap.examples, meta.num_rows, snap.rows))
        sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        starts = np.cumsum([0, *sizes]).tolist()
        self.path, self.n = path, snap.rows
        self.groups = [slice(a, b) for a, b in itertools.pairwise(starts)]
        self._first = {g.start: i for i, g in enumerate(self.groups)}
        small = len(snap.classes) <= np.iinfo(np.int16).max + 1
        self.dtype = np.dtype(np.int16 if small else np.int32)
        self._served = np.zeros(len(self.groups), dtype=bool)
        self._whole: np.ndarray | None = None
        self._lock = threading.Lock()
        self._files = threading.local()  # a reader per thread

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, pos: slice | np.ndarray) -> np.ndarray:
        """The labels at ``pos``: a row group streamed the first time it is asked for, else
        from the whole column."""
        g = self._first.get(pos.start) if isinstance(pos, slice) else None
        if g is not None and self.groups[g] == pos and self._whole is None:
            with self._lock:
                again = bool(self._served[g])
                self._served[g] = True
            if not again:
                return self._group(g)
        return self.whole()[pos]

    def prefetch(self) -> None:
        """Decode every label on a thread now (:meth:`whole`), for a caller that will read them
        all after other work; a read meanwhile waits for it. The thread is not a daemon: it is
        never cut off inside pyarrow at exit. A decoding error is left to the reader, whose own
        decode raises it where it can be reported."""

        def decode() -> None:
            with contextlib.suppress(ManifestError):
                self.whole(threads=1)  # one core: the other does the caller's work meanwhile

        threading.Thread(target=decode, name="dsreg-labels").start()

    def whole(self, *, threads: int = 2) -> np.ndarray:
        """Every label, decoded once (on ``threads`` threads) and kept."""
        with self._lock:
            if self._whole is None:
                out = np.empty(self.n, dtype=self.dtype)
                if threads == 1:
                    self._decode(out, 0, 1)
                else:
                    with ThreadPoolExecutor(max_workers=threads) as pool:
                        for f in [
                            pool.submit(self._decode, out, t, threads) for t in range(threads)
                        ]:
                            f.result()
                self._whole = out
            return self._whole

    def _decode(self, out: np.ndarray, first: int, step: int) -> None:
        """Every ``step``-th row group from ``first`` into ``out``: a row group's buffers are
        reused for the next."""
        for g in range(first, len(self.groups), step):
            out[self.groups[g]] = self._group(g)

    def _group(self, g: int) -> np.ndarray:
        try:
            pf = getattr(self._files, "reader", None)
            if pf is None:
                pf = self._files.reader = pq.ParquetFile(self.path)
            col = pf.read_row_group(g, columns=["label"], use_threads=False).column(0)
            return as_numpy(col)
        except (pa.ArrowException, OSError, ValueError) as e:
            raise ManifestError(
                f"cannot read the labels of {self.path}: {e}; run 'dsreg verify'"
            ) from e


def _read_overlay(path: Path, version: int, *, threads: int = 1) -> pa.Table:
    """The columns of a verified corrections table the view rule reads; verdicts stay
    dictionary-encoded, as stored: six strings, not millions."""
    cols = ["row", "verdict", "suggested_label"]
    if version in LABEL_SET_VERSIONS:
        cols += ["labels", "label_counts"]
    return read_columns(path, cols, dictionary=["verdict"], threads=threads)


def _rows_differ(examples: str, got: int, want: int) -> str:
    return (
        f"examples table {short(examples)} has {got} rows, its snapshot says {want}; "
        "run 'dsreg verify'"
    )

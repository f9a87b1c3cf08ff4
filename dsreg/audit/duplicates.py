"""The duplicates audit: which rows of a test set repeat each other, or rows of other datasets.

Work is per distinct payload: the test set's payloads are fingerprinted (``fingerprints.py``,
reusing what is stored) and matched, tier by tier, against each ``--against`` dataset's
payloads (contamination) and, with ``within``, against the test set's own (duplicates):

- ``exact``: equal payload digests (distance 0);
- ``image``: the test image's pHash within ``image_threshold`` bits of the other image's or of
  one of its crops' (the distance: the bits that differ from the nearest), confirmed by the
  two images' pixels (``confirm.py``);
- ``text``: shingle Jaccard similarity at least ``text_threshold`` (distance ``1 - J``);
- ``ngram``: at least one shared 13-gram (distance: the fraction of the test text's 13-grams
  the match does not hold).

(``matching.py`` finds the pairs of each tier.)

An ``--against`` that names a folder (a corpus that is not registered) is read file by file:
its files are fingerprinted as they are (not stored), named by their path below the folder,
and the folder is named in the matches by a digest of its listing (each file's path and
digest). A file that cannot be read, or whose bytes cannot be fingerprinted (an undecodable
image, an empty text: it could never be matched), is counted and listed with its reason, never
skipped silently. One that names a Parquet file is a corpus of one item per row, an id and an
image or a text (``parquet_corpus``), fingerprinted and named the same way.

Rows are then named by verdict: ``contaminated`` (some row of another dataset matches it) or
``duplicate`` (it repeats an earlier row of its own set: of each group of rows that match one
another, the first row is kept and every other is a duplicate), each with every match it has,
best first (best tier, then nearest; a ``contaminated`` row's matches in the other datasets
before those in its own set). The findings are listed nearest first: by their best match's
tier, then its distance, then row. Rows without a payload (labels-only) are skipped and
counted; rows whose payload could not be read are counted and listed, never treated as clean.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsreg.audit import DEFAULT_IMAGE_THRESHOLD, DEFAULT_TEXT_THRESHOLD, TIERS
from dsreg.audit.engines import Engine, check_engine, run_batches
from dsreg.audit.fingerprints import (
    FILES_SCHEMA,
    METHOD,
    Listing,
    files_table,
    fingerprint_files,
    fingerprints_of,
    fingerprints_only,
    list_folder,
)
from dsreg.audit.lsh import band_plan
from dsreg.audit.matching import TierPairs, payload_pairs
from dsreg.audit.parquet_corpus import (
    ID_COLUMN,
    Corpus,
    fingerprint_blobs,
    in_order,
    read_corpus,
    windows,
)
from dsreg.errors import InvalidInputError
from dsreg.formats.corrections import MATCHES_TYPE, corrections_table
from dsreg.formats.manifests import HELD_INPUT, Snapshot
from dsreg.formats.tables import as_numpy
from dsreg.objects.hashing import hash_bytes
from dsreg.overlays.create import OverlayDraft
from dsreg.registry.folder import Registry
from dsreg.registry.reader import Resolved
from dsreg.registry.tables import read_examples

__all__ = [
    "DEFAULT_IMAGE_THRESHOLD",
    "DEFAULT_TEXT_THRESHOLD",
    "PRODUCER",
    "TIERS",
    "AuditResult",
    "Finding",
    "audit_duplicates",
    "check_sides",
    "check_thresholds",
    "corpus_of",
]

#: The producer name of an audit overlay (a re-run's tag is recognised by it).
PRODUCER = "dsreg.audit-duplicates"
_RANK = {t: i for i, t in enumerate(TIERS)}
LOCAL = Engine()


@dataclass(frozen=True, slots=True)
class Finding:
    """One audited row: its verdict and every match, best first; ``tier`` and ``distance``
    are its best match's (by which the findings are ordered, nearest first)."""

    row: int
    example_id: str
    verdict: str
    matches: tuple[dict[str, Any], ...]

    @property
    def tier(self) -> str:
        return str(self.matches[0]["tier"])

    @property
    def distance(self) -> float:
        return float(self.matches[0]["distance"])


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditResult:
    """What ``dsreg audit duplicates`` found and stored."""

    digest: str | None  # the audit overlay (None when no row was found)
    dataset: str
    revision: str
    rows: int
    audited: int
    skipped_labels_only: int
    unreadable: tuple[tuple[int, str, str], ...]  # (row, example id, reason)
    counts: dict[str, int]  # per verdict and per tier
    findings: tuple[Finding, ...]
    fingerprints: dict[str, int] = field(default_factory=dict)  # computed, reused
    # Files of an --against folder that could not be read: (path, reason).
    unreadable_against: tuple[tuple[str, str], ...] = ()
    # The tag made with the overlay (an ``ops.tag.TagResult``; the API layer sets it).
    tagged: Any = None
    # The overlay to store, until it is stored (``ops.overlay.store_overlay``, which sets
    # ``digest``): None when no row was found.
    draft: OverlayDraft | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "overlay": self.digest,
            "dataset": self.dataset,
            "revision": self.revision,
            "rows": self.rows,
            "audited": self.audited,
            "skipped_labels_only": self.skipped_labels_only,
            "unreadable": [
                {"row": r, "example_id": i, "reason": why} for r, i, why in self.unreadable
            ],
            "unreadable_against": [
                {"path": p, "reason": why} for p, why in self.unreadable_against
            ],
            "counts": self.counts,
            "fingerprints": self.fingerprints,
            "tagged": self.tagged.revision if self.tagged is not None else None,
            "findings": [
                {
                    "row": f.row,
                    "example_id": f.example_id,
                    "verdict": f.verdict,
                    "tier": f.tier,
                    "distance": f.distance,
                    "matches": list(f.matches),
                }
                for f in self.findings
            ],
        }


def check_sides(against: Sequence[object], *, within: bool) -> None:
    """Refuse an audit with nothing to audit against, before any work."""
    if not against and not within:
        raise InvalidInputError("nothing to audit against: give --against DATASET or --within")


def check_thresholds(image_threshold: int, text_threshold: float) -> None:
    """Refuse thresholds out of range before any work."""
    if not 0 <= image_threshold <= 32:
        raise InvalidInputError(
            f"image threshold {image_threshold} is out of range: use a Hamming distance from 0 "
            f"to 32 bits (default {DEFAULT_IMAGE_THRESHOLD})"
        )
    band_plan(text_threshold)


@dataclass
class _Side:
    """One dataset's rows with payloads, and the fingerprints of its distinct payloads."""

    revision: str
    ids: list[str]
    rows: np.ndarray  # snapshot rows with a payload
    payload_index: np.ndarray  # per such row: its payload's row in ``fp``
    fp: pa.Table
    labels: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def _side(reg: Registry, resolved: Resolved, engine: Engine) -> tuple[_Side, int, Any]:
    snap: Snapshot = reg.snapshot(resolved.revision.snapshot)
    table = read_examples(reg, snap, columns=["example_id", "label", "blob"])
    blobs = table.column("blob").combine_chunks()
    has = ~as_numpy(pc.is_null(blobs)).astype(bool)
    rows = np.flatnonzero(has)
    made = fingerprints_of(
        reg,
        resolved.revision.snapshot,
        blobs,
        engine=engine,
        progress=lambda done, total: engine.progress("fingerprint", done, total),
    )
    index = pc.index_in(blobs.filter(pa.array(has)), value_set=made.table.column("payload"))
    side = _Side(
        revision=resolved.digest,
        ids=table.column("example_id").to_pylist(),
        rows=rows,
        payload_index=as_numpy(index).astype(np.int64),
        fp=made.table,
        labels=as_numpy(table.column("label")).astype(np.int64),
    )
    return side, snap.rows - len(rows), made


def _folder_side(listing: Listing, engine: Engine) -> tuple[_Side, list[tuple[str, str]]]:
    """A corpus folder that is not registered: every file ``listing`` names, fingerprinted
    from its bytes on ``engine``; and the files that could not be read or fingerprinted, with
    the reason."""
    folder, rels, bad = listing.folder, listing.files, list(listing.unreadable)
    paths = pa.array([os.fspath(folder / r) for r in rels], pa.string())
    inputs = pa.table({"path": paths, "expect": pa.nulls(len(rels), pa.string())})
    parts = run_batches(
        fingerprint_files,
        inputs.cast(FILES_SCHEMA),
        engine,
        lambda done, total: engine.progress("fingerprint", done, total),
    )
    table = files_table(parts)
    table = table.take(pc.index_in(paths, value_set=table.column("path")))  # listing order
    errors = table.column("read_error").to_pylist()
    bad += [(rel, why) for rel, why in zip(rels, errors, strict=True) if why is not None]
    ids = [rel for rel, why in zip(rels, errors, strict=True) if why is None]
    fp = fingerprints_only(table)
    return _listed_side(ids, fp), bad + _unfingerprinted(ids, fp)


def _corpus_side(corpus: Corpus, engine: Engine) -> tuple[_Side, list[tuple[str, str]]]:
    """A corpus file that is not registered (``parquet_corpus``): its payloads fingerprinted on
    ``engine`` window by window, named by their ids; and the ids of the rows without a payload,
    with one too large, or whose payload could not be fingerprinted, with the reason."""
    parts: list[pa.Table] = []
    ids: list[str] = []
    bad: list[tuple[str, str]] = []
    done = 0

    def progress(rows: int, _: int) -> None:
        engine.progress("fingerprint", done + rows, len(corpus.ids))

    for window in windows(corpus):
        work = functools.partial(fingerprint_blobs, kind=corpus.kind)
        parts += run_batches(work, window.blobs, engine, progress)
        ids += window.blobs.column(ID_COLUMN).to_pylist()
        bad += window.skipped
        done += window.rows
    fp = in_order(ids, parts)
    return _listed_side(ids, fp), bad + _unfingerprinted(ids, fp)


def _unfingerprinted(ids: list[str], fp: pa.Table) -> list[tuple[str, str]]:
    """The items of a corpus that is not registered (one per row of ``fp``, named by ``ids``)
    whose bytes could not be fingerprinted, with the reason: never matched, so listed."""
    kinds, errors = fp.column("kind").to_pylist(), fp.column("error").to_pylist()
    return [
        (i, str(why))
        for i, kind, why in zip(ids, kinds, errors, strict=True)
        if kind == "unreadable"
    ]


def _listed_side(ids: list[str], fp: pa.Table) -> _Side:
    """A corpus that is not registered, one item per row of ``fp`` named by ``ids``; the
    corpus is named by the digest of its listing (each id and its payload's digest)."""
    digests = fp.column("payload").to_pylist()
    listing = "".join(f"{i}\t{d}\n" for i, d in zip(ids, digests, strict=True))
    n = len(ids)
    return _Side(
        revision=hash_bytes(listing.encode()),
        ids=ids,
        rows=np.arange(n, dtype=np.int64),
        payload_index=np.arange(n, dtype=np.int64),
        fp=fp,
    )


def _rows_of(side: _Side, payloads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every ``(i, row)`` with ``row`` a row of ``side`` holding payload ``payloads[i]``."""
    order = np.argsort(side.payload_index, kind="stable")
    sorted_p = side.payload_index[order]
    left = np.searchsorted(sorted_p, payloads, side="left")
    counts = (np.searchsorted(sorted_p, payloads, side="right") - left).astype(np.int64)
    first = np.cumsum(counts) - counts
    picks = np.repeat(left - first, counts) + np.arange(int(counts.sum()), dtype=np.int64)
    owner = np.repeat(np.arange(len(payloads), dtype=np.int64), counts)
    return owner, side.rows[order[picks]].astype(np.int64)


def _row_matches(
    test: _Side, other: _Side, pairs: list[TierPairs]
) -> dict[int, list[tuple[int, str, float]]]:
    """Per test row: ``(other row, tier, distance)`` of every row of ``other`` it matches, by
    its best tier (then distance) where several tiers match the same two rows."""
    if not pairs:
        return {}
    qp = np.concatenate([p.query for p in pairs]).astype(np.int64)
    sp = np.concatenate([p.stored for p in pairs]).astype(np.int64)
    dist = np.concatenate([np.asarray(p.distance, dtype=np.float64) for p in pairs])
    rank = np.concatenate([np.full(len(p.query), _RANK[p.tier], dtype=np.int64) for p in pairs])
    k, test_row = _rows_of(test, qp)
    j, other_row = _rows_of(other, sp[k])
    k = k[j]
    test_row = test_row[j]
    # Best first, then the first of each (test row, other row).
    order = np.lexsort((dist[k], rank[k], other_row, test_row))
    test_row, other_row, k = test_row[order], other_row[order], k[order]
    keep = np.ones(len(k), dtype=bool)
    keep[1:] = (test_row[1:] != test_row[:-1]) | (other_row[1:] != other_row[:-1])
    out: dict[int, list[tuple[int, str, float]]] = {}
    for r, o, i in zip(
        test_row[keep].tolist(), other_row[keep].tolist(), k[keep].tolist(), strict=True
    ):
        out.setdefault(r, []).append((o, TIERS[int(rank[i])], float(dist[i])))
    return out


def _within(test: _Side, pairs: list[TierPairs]) -> dict[int, list[tuple[int, str, float]]]:
    """The duplicate rows of the test set: in each group of rows linked by a match, every row
    but the first, each with its matches among the group's other rows."""
    matched = _row_matches(test, test, pairs)
    parent = {r: r for r in matched}

    def root(r: int) -> int:
        while parent.setdefault(r, r) != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    links = {r: [(o, t, d) for o, t, d in ms if o != r] for r, ms in matched.items()}
    for r, ms in links.items():
        for o, _, _ in ms:
            a, b = root(r), root(o)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return {r: ms for r, ms in links.items() if ms and root(r) != r}


def audit_duplicates(
    base: Resolved,
    *,
    against: Sequence[Resolved | Listing | Corpus] = (),
    within: bool = False,
    image_threshold: int = DEFAULT_IMAGE_THRESHOLD,
    text_threshold: float = DEFAULT_TEXT_THRESHOLD,
    engine: Engine = LOCAL,
) -> AuditResult:
    """Audit revision ``base`` against each of ``against`` (contamination: revisions, corpus
    folders or Parquet corpora) and, with ``within``, against itself (duplicates); the
    findings are the result's ``draft``, an ``audit`` overlay to store (see the module).
    Fingerprints are computed on ``engine`` (which also hears of the progress); the findings
    are the same on every engine.

    The caller holds the registry's lock, shared, from the first fingerprints table stored
    until the overlay naming them is: gc waits, and never removes a table the overlay is about
    to hold."""
    check_thresholds(image_threshold, text_threshold)
    check_engine(engine.name, engine.ray_address)
    check_sides(against, within=within)
    return _audit(base, against, within, (image_threshold, text_threshold), engine=engine)


def _audit(
    base: Resolved,
    others: Sequence[Resolved | Listing | Corpus],
    within: bool,
    thresholds: tuple[int, float],
    *,
    engine: Engine,
) -> AuditResult:
    image_threshold, text_threshold = thresholds
    reg = base.registry
    test, skipped, made = _side(reg, base, engine)
    computed, reused = made.computed, made.table.num_rows - made.computed
    found: dict[int, tuple[str, list[_Match]]] = {}
    inputs = {HELD_INPUT: made.digest}
    bad_files: list[tuple[str, str]] = []
    for k, other in enumerate(others):
        if isinstance(other, Listing):
            side, bad = _folder_side(other, engine)
            computed += side.fp.num_rows
            bad_files += [(str(other.folder / p), why) for p, why in bad]
        elif isinstance(other, Corpus):
            side, bad = _corpus_side(other, engine)
            computed += side.fp.num_rows
            bad_files += [(f"{other.path}: {i}", why) for i, why in bad]
        else:
            side, _, theirs = _side(reg, other, engine)
            computed += theirs.computed
            inputs[f"against{k}_{HELD_INPUT}"] = theirs.digest
        inputs[f"against{k}"] = side.revision
        pairs = payload_pairs(test.fp, side.fp, image_threshold, text_threshold)
        for r, ms in _row_matches(test, side, pairs).items():
            entry = found.setdefault(r, ("contaminated", []))
            entry[1].extend(_Match(side.revision, side.ids[o], t, d, False) for o, t, d in ms)
    if within:
        pairs = payload_pairs(test.fp, test.fp, image_threshold, text_threshold)
        for r, ms in _within(test, pairs).items():
            entry = found.setdefault(r, ("duplicate", []))
            entry[1].extend(_Match(test.revision, test.ids[o], t, d, True) for o, t, d in ms)
    params = {
        "method": METHOD,
        "image_threshold": image_threshold,
        "text_threshold": text_threshold,
        "within": within,
    }
    how = _Provenance(params, inputs, {"computed": computed, "reused": reused})
    result = _store(reg, base, test, found, skipped, how)
    return replace(result, unreadable_against=tuple(bad_files))


def corpus_of(against: str) -> Listing | Corpus | None:
    """An ``--against`` that is a path: a folder (listed now) or a Parquet file of a corpus
    (read and checked now), refused before any work where it holds nothing; ``None`` for
    anything else (a revision, resolved at the door)."""
    if os.path.isdir(against):
        listing = list_folder(Path(against))
        if not listing.files and not listing.unreadable:
            raise InvalidInputError(
                f"--against {against}: the folder holds no file to audit against (names "
                "starting with '.' are skipped); give the corpus folder or a Parquet file"
            )
        return listing
    if os.path.isfile(against):
        return read_corpus(Path(against))
    return None


class _Match(NamedTuple):
    """One match of an audited row: the matched dataset and example, the tier and distance,
    and whether it is in the audited set itself (``--within``)."""

    dataset: str
    example_id: str
    tier: str
    distance: float
    own: bool

    def order(self) -> tuple[bool, int, float, str, str]:
        """A row's matches best first: another dataset's before its own set's (the verdict
        ``contaminated`` names the other dataset first), then best tier, nearest, by name."""
        return (self.own, _RANK[self.tier], self.distance, self.dataset, self.example_id)


def _nearest_first(f: Finding) -> tuple[int, float, int]:
    """Findings in the order a reviewer should see them: best tier, nearest, then row."""
    return (_RANK[f.tier], f.distance, f.row)


@dataclass(frozen=True, slots=True)
class _Provenance:
    """What the overlay's producer records, and how many fingerprints were computed."""

    params: dict[str, Any]
    inputs: dict[str, str]
    fingerprints: dict[str, int]


def _unreadable(test: _Side) -> tuple[tuple[int, str, str], ...]:
    kinds = as_numpy(pc.equal(test.fp.column("kind"), "unreadable")).astype(bool)
    errors = test.fp.column("error").to_pylist()
    out = []
    for pos, p in enumerate(test.payload_index.tolist()):
        if kinds[p]:
            r = int(test.rows[pos])
            out.append((r, test.ids[r], str(errors[p])))
    return tuple(out)


def _store(
    reg: Registry,
    base: Resolved,
    test: _Side,
    found: dict[int, tuple[str, list[_Match]]],
    skipped: int,
    how: _Provenance,
) -> AuditResult:
    unreadable = _unreadable(test)
    rows = np.array(sorted(found), dtype=np.int64)
    findings = []
    for r in rows.tolist():
        verdict, ms = found[r]
        matches = tuple(
            {
                "dataset": m.dataset,
                "example_id": m.example_id,
                "tier": m.tier,
                "distance": m.distance,
            }
            for m in sorted(ms, key=_Match.order)
        )
        findings.append(Finding(r, test.ids[r], verdict, matches))
    counts: dict[str, int] = {"duplicate": 0, "contaminated": 0}
    for f in findings:
        counts[f.verdict] += 1
        counts[f"tier_{f.tier}"] = counts.get(f"tier_{f.tier}", 0) + 1
    counts["unreadable"] = len(unreadable)
    draft = None
    snapshot = base.revision.snapshot
    if findings:
        table = corrections_table(
            rows=rows,
            example_ids=[f.example_id for f in findings],
            given_label=test.labels[rows],
            suggested_label=None,
            verdict=[f.verdict for f in findings],
        ).append_column(
            pa.field("matches", MATCHES_TYPE),
            pa.array([list(f.matches) for f in findings], MATCHES_TYPE),
        )
        draft = OverlayDraft(
            kind="audit",
            table=table,
            producer=PRODUCER,
            params=how.params,
            inputs=how.inputs,
            summary={"skipped_labels_only": skipped, "unreadable": len(unreadable)},
        )
    return AuditResult(
        digest=None,
        dataset=base.dataset,
        revision=base.digest,
        rows=reg.snapshot(snapshot).rows,
        audited=len(test.rows) - len(unreadable),
        skipped_labels_only=skipped,
        unreadable=unreadable,
        counts=counts,
        findings=tuple(sorted(findings, key=_nearest_first)),
        fingerprints=how.fingerprints,
        draft=draft,
    )

"""Make overlays of a revision: from human validation votes, or from the detector."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dsreg._util.inputs import input_file
from dsreg._util.lazy import lazy_imports
from dsreg._util.progress import ProgressHook, no_progress
from dsreg._version import __version__
from dsreg.detector.options import DetectorOptions
from dsreg.errors import ManifestError
from dsreg.formats.arrays import repeated_string
from dsreg.formats.corrections import corrections_table
from dsreg.formats.manifests import OverlayKind, Snapshot
from dsreg.formats.tables import as_numpy
from dsreg.objects.digest import short
from dsreg.objects.hashing import FileDigest, hash_file
from dsreg.overlays.write import JoinedRows, write_overlay
from dsreg.registry.folder import Registry
from dsreg.registry.reader import Resolved
from dsreg.registry.tables import read_examples
from dsreg.views.dataset import Dataset

# The votes readers (CSV, the release's JSON, the matching) only for a votes overlay.
with lazy_imports():
    from dsreg.overlays import votes as overlay_votes

__all__ = [
    "LABEL_FORMATS",
    "CreatedOverlay",
    "OverlayDraft",
    "detect_draft",
    "labels_draft",
    "store_draft",
    "votes_draft",
]

LABEL_FORMATS = ("real", "counts", "csv", "mmlu-redux", "status")


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatedOverlay:
    """An overlay just stored, with what its producer reported."""

    digest: str
    dataset: str
    base: str
    revision: str
    kind: str
    summary: dict[str, Any]
    details: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "overlay": self.digest,
            "dataset": self.dataset,
            "base": self.base,
            "revision": self.revision,
            "kind": self.kind,
            "summary": self.summary,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class OverlayDraft:
    """An overlay's corrections and what its producer reports, before it is stored.

    ``producer`` names the producer (``dsreg.import-votes``); ``params`` and ``inputs`` go into
    the manifest's producer, ``summary`` into its summary. ``details`` is handed back to the
    caller unstored (the detector's result); ``joined`` is what the producer's join read, the
    row check of the table (`write_overlay`).
    """

    kind: OverlayKind
    table: pa.Table
    producer: str
    params: Mapping[str, Any]
    inputs: dict[str, Any]
    summary: Mapping[str, Any]
    details: Any = None
    joined: JoinedRows | None = None


def votes_draft(base: Resolved, path: Path, *, format: str, threshold: int) -> OverlayDraft:
    """A ``validated`` overlay of ``base``'s snapshot from a votes file. The votes are matched
    to rows by a join over the snapshot's verified examples object, which is also the row
    check of the overlay (`JoinedRows`): 50 million ids are never decoded into Python."""
    ds = Dataset(base)
    reg = base.registry
    # Before the file is hashed: a named pipe or a device would be read forever.
    input_file(path, what=f"votes file {str(path)!r}")
    # The file's digest (the producer's input) is taken on a second thread while it is read and
    # matched: BLAKE3 releases the GIL, and neither the reading nor the join keeps both cores
    # busy all the time. A file that cannot be read is reported by the reader, not here.
    # DuckDB, which the join needs, is imported on the same thread after it (a fifth of a
    # second, spent while the file is parsed rather than before the join).
    pool = ThreadPoolExecutor(1)
    votes_digest = pool.submit(hash_file, path)
    pool.submit(importlib.import_module, "duckdb")
    pool.shutdown(wait=False)
    result = overlay_votes.read_votes(
        path,
        format=format,
        threshold=threshold,
        dataset=ds.name,
        classes=ds.classes,
        examples=lambda: _examples_file(reg, ds.snapshot),
    )
    return OverlayDraft(
        kind="validated",
        table=result.table,
        producer="dsreg.import-votes",
        params=result.params,
        inputs={"votes": votes_digest.result(), **result.inputs},
        summary=result.summary,
        joined=JoinedRows(examples=ds.snapshot.examples, labels=result.joined_labels),
    )


def _examples_file(reg: Registry, snap: Snapshot) -> Path:
    """The path of a snapshot's examples table, its bytes re-hashed first, for DuckDB to read."""
    import pyarrow.parquet as pq

    path = reg.store.verified_path(snap.examples)
    rows = pq.ParquetFile(path).metadata.num_rows
    if rows != snap.rows:
        raise ManifestError(
            f"examples table {short(snap.examples)} has {rows} rows; its snapshot says {snap.rows}"
        )
    return path


def labels_draft(
    base: Resolved, path: Path, *, format: str, threshold: float = 0.5
) -> OverlayDraft:
    """An overlay of ``base``'s snapshot from a published relabeling (``real``: ImageNet-ReaL
    lists; ``counts``: rater counts, as CIFAR-10H), a published re-annotation of a question
    set (``mmlu-redux``, ``status``: ``overlays.published``) or a user's corrections CSV
    (``csv``). Relabelings and re-annotations make ``validated`` overlays, a user's CSV a
    ``manual`` one."""
    from dsreg.overlays.corrections_csv import import_csv
    from dsreg.overlays.published import PUBLISHED_FORMATS, import_published
    from dsreg.overlays.relabel import import_counts, import_real
    from dsreg.views.questions import question_rows

    input_file(path, what=f"{format} file {str(path)!r}")
    ds = Dataset(base)
    if format in PUBLISHED_FORMATS:
        result = import_published(
            path,
            format=format,
            questions=question_rows(base),
            dataset=ds.name,
            id_column=ds.snapshot.source.get("id_column"),
        )
        return OverlayDraft(
            kind="validated",
            table=result.table,
            producer="dsreg.import-labels",
            params=result.params,
            inputs={"labels": hash_file(path)},
            summary=result.summary,
        )
    examples = read_examples(base.registry, ds.snapshot, columns=["example_id", "label"])
    ids = examples.column("example_id").combine_chunks()
    labels = as_numpy(examples.column("label"))
    if format == "real":
        result = import_real(path, example_ids=ids, labels=labels, classes=ds.classes)
    elif format == "counts":
        result = import_counts(
            path, example_ids=ids, labels=labels, classes=ds.classes, threshold=threshold
        )
    else:
        result = import_csv(path, example_ids=ids, labels=labels, classes=ds.classes)
    return OverlayDraft(
        kind="manual" if format == "csv" else "validated",
        table=result.table,
        producer="dsreg.import-labels",
        params=result.params,
        inputs={"labels": hash_file(path)},
        summary=result.summary,
    )


def detect_draft(
    base: Resolved,
    probs: Path | np.ndarray,
    *,
    options: DetectorOptions | None = None,
    progress: ProgressHook = no_progress,
    digest: FileDigest | None = None,
) -> OverlayDraft:
    """A ``detected`` overlay of ``base``: confident learning on out-of-sample probabilities
    aligned with the revision's rows (its view's rows, in order); ``progress`` hears of each
    pass over them. ``digest``: the probabilities file's digest, if the caller began it."""
    from dsreg.detector.detector import detect
    from dsreg.detector.probs import open_probabilities

    ds = Dataset(base)
    view = ds.view_rows()
    if isinstance(probs, Path):
        input_file(probs, what=f"probabilities file {str(probs)!r}")
    with open_probabilities(probs) as source:
        # The digest (the overlay's provenance) on a second core while the detector works,
        # unless the caller began it earlier.
        source.start_digest(digest)
        det = detect(view.label, source, options, progress=progress)
        probs_digest = source.digest()
    # The corrections table is sorted by row: the flagged rows in that order, their ids and
    # labels read from the verified examples object, only those rows kept as it is decoded.
    # They are then the table's row check too (JoinedRows): it is not read a second time.
    snap_rows = view.rows[det.rows]
    order = np.argsort(snap_rows, kind="stable")
    rows = snap_rows[order]
    keep = np.zeros(ds.snapshot.rows, dtype=bool)
    keep[rows] = True
    examples = read_examples(base.registry, ds.snapshot, columns=["example_id", "label"], keep=keep)
    given = as_numpy(examples.column("label"))
    table = corrections_table(
        rows=rows,
        example_ids=examples.column("example_id"),
        given_label=given,
        suggested_label=np.asarray(det.suggested_labels)[order],
        verdict=repeated_string("suspected", len(rows)),
        score=np.asarray(det.scores, dtype=np.float64)[order],
    )
    per_class = {ds.classes[i]: int(c) for i, c in enumerate(det.issues_per_class) if c}
    return OverlayDraft(
        kind="detected",
        table=table,
        producer="dsreg.detect",
        params=det.params,
        inputs={"labels": ds.digest, "pred_probs": probs_digest},
        summary={
            "noise_rate": float(det.noise_rate),
            "num_label_issues_estimate": int(det.num_issues_estimate),
            "issues_per_class": per_class,
            "renormalized_rows": int(det.renormalized_rows),
        },
        details=det,
        joined=JoinedRows(examples=ds.snapshot.examples, labels=given),
    )


def store_draft(
    reg: Registry,
    snapshot: str,
    draft: OverlayDraft,
    *,
    command: str,
    credit: Mapping[str, str] | None = None,
) -> str:
    """Store ``draft`` as an overlay of ``snapshot``, made by this version of dsreg; return its
    digest. ``credit`` (``dsreg.formats.credit.make_credit``) is the reference of the
    corrections' source, kept in the producer; without it the producer has no ``credit`` key,
    so an overlay made without one has the digest it always had."""
    producer: dict[str, Any] = {
        "name": draft.producer,
        "version": __version__,
        "params": dict(draft.params),
        "inputs": draft.inputs,
    }
    if credit:
        producer["credit"] = dict(credit)
    return write_overlay(
        reg,
        base=snapshot,
        kind=draft.kind,
        table=draft.table,
        producer=producer,
        summary=dict(draft.summary),
        command=command,
        joined=draft.joined,
    )

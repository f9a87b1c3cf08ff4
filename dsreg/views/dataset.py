"""``dsreg.open``: a pinned revision, served as its view, verified before any byte is returned.

A ``Dataset`` serves the view rule of ``dsreg.views.rule`` (numpy); ``Dataset.sql`` hands its
revision to ``dsreg.views.sql``, which never imports this module.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dsreg._util.extras import require
from dsreg.formats.arrays import from_numpy, null_array, string_array
from dsreg.formats.manifests import Overlay, Snapshot, View
from dsreg.formats.tables import served_metadata
from dsreg.objects.digest import short
from dsreg.registry.reader import Resolved, local_reader, pinned
from dsreg.registry.tables import map_examples, read_corrections, read_examples

if TYPE_CHECKING:
    import datasets
    import pandas as pd
    import polars as pl

    from dsreg.views.questions import QuestionSet
    from dsreg.views.rule import ViewRows
    from dsreg.views.torchdata import TorchDataset

__all__ = ["Dataset", "Example", "open_digest"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Example:
    """One example of a revision's view."""

    row: int
    example_id: str
    label: int
    label_name: str
    given_label: int
    verdict: str | None
    blob: str | None
    size: int | None
    _dataset: Dataset = field(repr=False, compare=False)
    # The multilabel view: every label that fits; another view: the label set of the last
    # overlay naming the row (None where it holds none).
    labels: tuple[int, ...] | None = None
    # The raters' counts of the last overlay naming the row, one per class (None: none).
    label_counts: tuple[int, ...] | None = None

    @property
    def path(self) -> Path | None:
        """The payload's path in the store, after its bytes were checked against ``blob``."""
        if self.blob is None:
            return None
        return self._dataset._verified_path(self.blob)

    def read_bytes(self) -> bytes:
        """The payload's bytes; raises ``CorruptObjectError`` rather than return wrong ones."""
        if self.blob is None:
            from dsreg.errors import InvalidInputError

            raise InvalidInputError(
                f"example {self.example_id!r} has no payload: this dataset is label-only"
            )
        return self._dataset.registry.store.read_bytes(self.blob)


class Dataset:
    """A resolved revision: its digest (to pin and cite), its view's rows and labels."""

    def __init__(self, resolved: Resolved) -> None:
        self.resolved = resolved
        self.registry = registry = resolved.registry
        self.digest: str = resolved.digest
        self.revision = resolved.revision
        self.snapshot_digest = resolved.revision.snapshot
        self.snapshot: Snapshot = registry.snapshot(self.snapshot_digest)
        self.overlays: tuple[tuple[str, Overlay], ...] = tuple(
            (d, registry.overlay(d)) for d in resolved.revision.overlays
        )
        self._verified: set[str] = set()

    # -- identity ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.snapshot.dataset

    @property
    def tag(self) -> str | None:
        return self.resolved.tag

    @property
    def view(self) -> View:
        return self.revision.view

    @property
    def classes(self) -> tuple[str, ...]:
        return self.snapshot.classes

    def __repr__(self) -> str:
        at = self.tag or short(self.digest)
        return f"<dsreg.Dataset {self.name}@{at} {self.view} rows={len(self)} {short(self.digest)}>"

    # -- data -------------------------------------------------------------------------------
    @functools.cached_property
    def _examples(self) -> pa.Table:
        return read_examples(self.registry, self.snapshot, data=self._examples_data)

    @property
    def _examples_data(self) -> pa.Buffer | None:
        """The examples object's bytes mapped and re-hashed for the call under way (set by
        ``labels()``, which reads the label column and then the view's rows: one mapping,
        one hash), else None: every other read maps and re-hashes the object itself."""
        data: pa.Buffer | None = self.__dict__.get("_call_data")
        return data

    @functools.cached_property
    def _corrections(self) -> list[pa.Table]:
        return [read_corrections(self.registry, ov, base=self.snapshot) for _, ov in self.overlays]

    @functools.cached_property
    def _rule_corrections(self) -> list[pa.Table]:
        """The corrections' view-rule columns (``read_corrections(rule_only=True)``, checked
        the same way): what ``len`` and ``iter_batches`` read; the whole tables if read."""
        if "_corrections" in self.__dict__:
            return self._corrections
        return [
            read_corrections(self.registry, ov, base=self.snapshot, rule_only=True)
            for _, ov in self.overlays
        ]

    @functools.cached_property
    def _view(self) -> ViewRows:
        from dsreg.views.rule import apply_view, kept_values, merge_overlays, view_mask

        # The rule's columns of the corrections only (the whole tables if read already).
        merged = merge_overlays(self.snapshot.rows, self._rule_corrections)
        mask = view_mask(self.view, merged)
        if "_examples" in self.__dict__:
            col = self._examples.column("label")
        else:  # the rule needs the labels only: labels() then reads the view's rows alone
            col = read_examples(
                self.registry, self.snapshot, columns=["label"], data=self._examples_data
            ).column("label")
        # The kept rows' labels taken chunk by chunk (no copy of the whole column first).
        kept = kept_values(col, mask[0])
        del col
        return apply_view(self.view, None, merged, mask=mask, kept_labels=kept)

    @functools.cached_property
    def rated(self) -> tuple[str, ...]:
        """Which of ``labels`` and ``label_counts`` this revision's overlays carry (a label
        set or raters' counts on some row): the columns its view serves beyond the base ones
        (the multilabel view serves ``labels`` in any case)."""
        from dsreg.views.rule import carried

        return carried(self._rule_corrections)

    @functools.cached_property
    def _rated(self) -> dict[str, pa.Array]:
        """The view's rows' ``rated`` columns (the multilabel view's ``labels`` is its own)."""
        from dsreg.views.rule import served_lists

        rows = self._view.rows
        k = len(self.classes)
        return {
            name: served_lists(rows, self._rule_corrections, name, k)
            for name in self.rated
            if not (name == "labels" and self.view == "multilabel")
        }

    def view_rows(self) -> ViewRows:
        """The view's rows (snapshot positions), labels, given labels and verdicts, as arrays."""
        return self._view

    def sql(self, query: str, *, allow_files: bool = False) -> pa.Table:
        """Run DuckDB SQL in which ``this`` names this revision's view (its pinned digest, not
        the tag): ``ds.sql("SELECT label_name, count(*) FROM this GROUP BY ALL")``. Other
        revisions may be named as ``"dataset@tag"`` in the same query.

        Read-only: the query reads revisions and nothing else (no file, ATTACH, INSTALL, LOAD
        or SET; ``QueryError`` says so). ``allow_files=True`` gives DuckDB its full access."""
        # Imported by the first query: a checkout or a loader that only reads rows skips it.
        from dsreg.views.sql import query_revision

        return query_revision(self.resolved.reader, self.revision, query, allow_files=allow_files)

    def labels(self, *, review: bool = False) -> pa.Table:
        """The view as a table: row, example_id, label, label_name, given_label, verdict, blob,
        size, labels (the multilabel view; any view when the revision carries label sets:
        ``rated``), label_counts (when it carries raters' counts, a list of one count per
        class, null where the last overlay naming the row has none), then the metadata columns
        (``served_metadata``: a column named like one of the view's, possible only in a table
        ``dsreg add`` did not make, is left out): the columns ``iter_batches`` streams.

        ``review=True`` adds, after ``size``, what a reviewer reads of the last overlay naming
        each row (null where none does): suggested_label, suggested_label_name, score,
        votes_given, votes_guessed, votes_both, votes_neither, votes_neutral, votes_off_topic;
        the columns of the revision's SQL view (docs/queries.md, "Columns"). Off by default:
        at 50 million rows they are 1.3 GB that evaluating against the labels never reads."""
        if "_view" in self.__dict__ and "_examples" in self.__dict__:
            return self._labels(review=review)
        self.__dict__["_call_data"] = map_examples(self.registry, self.snapshot)
        try:
            return self._labels(review=review)
        finally:
            del self.__dict__["_call_data"]

    def _labels(self, *, review: bool) -> pa.Table:
        from dsreg.views.rule import review_columns

        v = self._view
        n = len(v.rows)
        if n == self.snapshot.rows:
            ex = self._examples
        elif "_examples" not in self.__dict__:
            # Only the view's rows are decoded, each row group filtered as it is read.
            keep = np.zeros(self.snapshot.rows, dtype=bool)
            keep[v.rows] = True
            ex = read_examples(self.registry, self.snapshot, keep=keep, data=self._examples_data)
        else:
            # Read already (ds[i]): a boolean filter copies runs of rows; a column of nulls
            # only (a label-only set's blob and size) is made anew at the view's length.
            keep = np.zeros(self._examples.num_rows, dtype=bool)
            keep[v.rows] = True
            mask = from_numpy(keep, pa.bool_())
            ex = pa.table(
                {
                    name: null_array(col.type, n)
                    if col.null_count == len(col)
                    else col.filter(mask)
                    for name, col in zip(
                        self._examples.column_names, self._examples.columns, strict=True
                    )
                }
            )
        label = from_numpy(v.label, pa.int32())
        cols: dict[str, Any] = {
            "row": from_numpy(v.rows, pa.int64()),
            "example_id": ex.column("example_id"),
            "label": label,
            # Names as a dictionary over the classes, sharing the labels' buffer (pandas: a
            # category), as the verdicts are: no per-row strings (docs/loaders.md).
            "label_name": pa.DictionaryArray.from_arrays(label, string_array(self.classes)),
            "given_label": from_numpy(v.given_label, pa.int32()),
            "verdict": v.verdict,
            "blob": ex.column("blob"),
            "size": ex.column("size"),
        }
        if review:
            cols.update(review_columns(v.rows, self._corrections, self.classes))
        if v.labels is not None:
            cols["labels"] = v.labels
        cols.update(self._rated)
        for name in served_metadata(ex.column_names):
            cols[name] = ex.column(name)
        return pa.table(cols)

    def iter_batches(self, batch_size: int = 65_536) -> Iterator[pa.RecordBatch]:
        """The view as Arrow record batches of at most ``batch_size`` rows, in snapshot order,
        read from the examples table a batch at a time (bounded memory at any size): the
        columns ``row, example_id, label, label_name, given_label, verdict, blob, size``
        (``labels`` in the multilabel view), then the served metadata columns: ``labels()``
        a batch at a time. The review columns (``labels(review=True)``) are not streamed:
        read them with ``labels(review=True)`` or SQL."""
        from dsreg.views.batches import iter_view_batches

        return iter_view_batches(
            self.registry, self.snapshot, self._rule_corrections, self.view, batch_size=batch_size
        )

    def __len__(self) -> int:
        if "_view" in self.__dict__:
            return len(self._view.rows)
        # Counted from the rows overlays name (views.sparse), without decoding the examples:
        # len() of a 50-million-row view is work in the size of its corrections. The examples
        # object is still re-hashed (once): a damaged set is refused here as anywhere.
        from dsreg.views.sparse import merge, sparse_views

        self._verified_path(self.snapshot.examples)

        return sparse_views(self.snapshot.rows, merge(self._rule_corrections), [self.view])[
            self.view
        ].size

    def __getitem__(self, i: int) -> Example:
        v = self._view
        n = len(v.rows)
        if not -n <= i < n:
            raise IndexError(f"index {i} out of range for a view of {n} rows")
        i %= n
        row = int(v.rows[i])
        ex = self._examples
        label = int(v.label[i])
        blob = ex.column("blob")[row].as_py()
        size = ex.column("size")[row].as_py()
        verdict = v.verdict[i].as_py()
        rated = {name: col[i].as_py() for name, col in self._rated.items()}
        lists = rated.get("labels") if v.labels is None else v.labels[i].as_py()
        counts = rated.get("label_counts")
        return Example(
            row=row,
            example_id=ex.column("example_id")[row].as_py(),
            label=label,
            label_name=self.classes[label],
            given_label=int(v.given_label[i]),
            verdict=verdict,
            blob=blob,
            size=size,
            _dataset=self,
            labels=None if lists is None else tuple(lists),
            label_counts=None if counts is None else tuple(counts),
        )

    def __iter__(self) -> Iterator[Example]:
        for i in range(len(self)):
            yield self[i]

    def _verified_path(self, digest: str) -> Path:
        if digest in self._verified:
            return self.registry.store.path(digest)
        path = self.registry.store.verified_path(digest)
        self._verified.add(digest)
        return path

    def describe(self) -> dict[str, Any]:
        """What ``dsreg show`` prints: manifest, rows, classes, overlays, full digest; for a
        question set also its ``task``, ``normalization`` and its first ``questions``."""
        return self._question_sample() | {
            "revision": self.digest,
            "spec": self.resolved.spec,
            "dataset": self.name,
            "tag": self.tag,
            "view": self.view,
            "snapshot": self.snapshot_digest,
            "examples": self.snapshot.examples,
            "snapshot_rows": self.snapshot.rows,
            "rows": len(self),
            "classes": list(self.classes),
            "source": self.snapshot.source,
            "overlays": [
                {
                    "digest": d,
                    "kind": ov.kind,
                    "producer": ov.producer.get("name"),
                    "rows": ov.summary.get("rows"),
                }
                for d, ov in self.overlays
            ],
            "manifest": self.revision.to_dict(),
            "several_labels": self._several_labels(),
        }

    def questions(self) -> QuestionSet:
        """Every row of the snapshot as a question (a question set's: ``dsreg add --questions``
        or ``--answers``): its question, choices and given answer, in snapshot order
        (``dsreg.views.questions.question_rows``)."""
        from dsreg.views.questions import question_rows

        return question_rows(self.resolved)

    def _question_sample(self, n: int = 3) -> dict[str, Any]:
        """A question set's task, normalisation and first ``n`` questions of the view (each
        with the label the view serves, by name); nothing for another set."""
        from dsreg.formats.questions.answers import EXACT_ANSWER, MULTIPLE_CHOICE

        if self.snapshot.task not in (MULTIPLE_CHOICE, EXACT_ANSWER):
            return {}
        rows = self.questions().rows
        v = self._view
        shown = [
            {
                "row": int(r),
                "question": rows[int(r)].question,
                "choices": rows[int(r)].choices,
                "label": self.classes[int(label)],
            }
            for r, label in zip(v.rows[:n], v.label[:n], strict=True)
        ]
        return {
            "task": self.snapshot.task,
            "normalization": self.snapshot.normalization,
            "questions": shown,
        }

    def _several_labels(self) -> int | None:
        """The multilabel view: how many served rows have more than one label that fits.
        Counted a batch at a time (``iter_batches``), or from the view already built: ``show``
        of a 50-million-row set never holds the whole view."""
        if self.view != "multilabel":
            return None
        import pyarrow.compute as pc

        def several(lists: pa.Array | pa.ChunkedArray) -> int:
            return int(pc.sum(pc.greater(pc.list_value_length(lists), 1)).as_py() or 0)

        if "_view" in self.__dict__ and self._view.labels is not None:
            return several(self._view.labels)
        return sum(several(b.column("labels")) for b in self.iter_batches(1 << 18))

    # -- loaders (dsreg.views.loaders; torch, datasets and pandas imported when called) --------
    def labels_array(self, align: str = "snapshot") -> np.ndarray:
        """The view's labels as an int64 numpy vector. ``align="snapshot"``: one entry per row
        of the snapshot, -1 where the view removes the row (index it with the test set's own
        order); ``align="view"``: the view's rows only, in snapshot order."""
        from dsreg.views.loaders import labels_array

        return labels_array(self, align)

    def to_pandas(self, *, review: bool = False) -> pd.DataFrame:
        """``labels(review=review)`` as a pandas DataFrame."""
        from dsreg.views.loaders import to_pandas

        return to_pandas(self, review=review)

    def to_polars(self, *, review: bool = False) -> pl.DataFrame:
        """``labels(review=review)`` as a polars DataFrame. Needs ``pip install
        'dsreg[polars]'``."""
        from dsreg.views.loaders import to_polars

        return to_polars(self, review=review)

    def _repr_html_(self) -> str:
        """A notebook's view of the revision: name, digest, view, rows, classes, overlays and
        its first rows, every value escaped."""
        from dsreg.views.notebook import dataset_html

        return dataset_html(self)

    def to_torch(
        self,
        transform: Callable[[Any], Any] | None = None,
        target_transform: Callable[[Any], Any] | None = None,
        *,
        image_mode: str | None = "RGB",
        target: str | tuple[str, ...] = "label",
    ) -> TorchDataset:
        """A map-style ``torch.utils.data.Dataset`` yielding ``(payload, target)`` in view order:
        images decoded by Pillow (``image_mode``, default RGB; ``None`` keeps the file's mode),
        other payloads as bytes, a label-only set's example ids. ``target``: ``"label"`` (an
        int), ``"label_counts"`` (the raters' counts, an int32 tensor of one per class),
        ``"labels"`` (the label set, an int8 multi-hot tensor), -1 throughout where the row
        holds none; a tuple of names gives a tuple. Safe in ``DataLoader`` workers started by
        fork or spawn (each reopens the revision; give picklable transforms for spawn). Needs
        ``pip install 'dsreg[torch]'``."""
        require("torch", "Dataset.to_torch")
        from dsreg.views.torchdata import TorchDataset

        return TorchDataset(
            self,
            reopen=open_digest,
            transform=transform,
            target_transform=target_transform,
            image_mode=image_mode,
            target=target,
        )

    def to_hf(self, *, cache_dir: str | os.PathLike[str] | None = None) -> datasets.Dataset:
        """A Hugging Face ``datasets.Dataset`` of the view: ``label``/``given_label`` as
        ``ClassLabel`` with the class names, an ``Image`` feature ``image`` for image payloads
        (else ``payload`` bytes), then the other columns of ``labels()``. Needs
        ``pip install 'dsreg[hf]'``."""
        from dsreg.views.loaders import to_hf

        out: datasets.Dataset = to_hf(self, reopen=open_digest, cache_dir=cache_dir)
        return out


def open_digest(root: str, digest: str) -> Dataset:
    """Revision ``digest`` of the registry at ``root``, opened afresh: how a loader's worker
    process (``to_torch``, ``to_hf``) reopens its revision."""
    return Dataset(pinned(local_reader(root), digest))

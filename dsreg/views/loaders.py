"""A revision in the tools researchers already use: numpy label vectors, pandas, a PyTorch
``Dataset`` and a Hugging Face ``datasets.Dataset``.

torch, ``datasets``, pandas, polars and Pillow are optional extras (``pip install
'dsreg[torch]'``, ``dsreg[hf]``, ``dsreg[pandas]``, ``dsreg[polars]``), imported by the call
that needs them, never by ``import dsreg``; without its extra a call fails naming it. A payload
is an image when its example id ends in an image suffix (``IMAGE_SUFFIXES``; an ImageFolder
tree's ids are its relative paths): images are decoded by Pillow, other payloads are served as
bytes, and a label-only dataset serves its example ids in their place.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from dsreg._util.extras import require
from dsreg.errors import DatasetFormatError, InvalidInputError
from dsreg.formats.manifests import Snapshot
from dsreg.registry.folder import Registry

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl
    import pyarrow as pa

    from dsreg.views.rule import ViewRows

__all__ = [
    "ALIGNS",
    "IMAGE_SUFFIXES",
    "Align",
    "Opener",
    "Source",
    "check_align",
    "decode_image",
    "is_image",
    "labels_array",
    "rated_array",
    "to_hf",
    "to_pandas",
    "to_polars",
]

Align = Literal["snapshot", "view"]
ALIGNS: tuple[Align, ...] = ("snapshot", "view")
# What Pillow decodes and image datasets ship as; matched case-insensitively.
IMAGE_SUFFIXES = frozenset(
    {".png", ".jpg", ".jpeg", ".jpe", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm"}
)


class Source(Protocol):
    """What the loaders read of a ``dsreg.views.dataset.Dataset`` (which this module does not
    import: the Dataset's methods call it)."""

    registry: Registry
    digest: str
    snapshot: Snapshot

    @property
    def name(self) -> str: ...
    @property
    def classes(self) -> tuple[str, ...]: ...
    @property
    def view(self) -> str: ...
    @property
    def rated(self) -> tuple[str, ...]: ...
    def labels(self, *, review: bool = False) -> pa.Table: ...
    def view_rows(self) -> ViewRows: ...
    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> Any: ...


# Opens revision ``digest`` of the registry at ``root`` afresh, in a worker: a module-level
# function (``dsreg.views.dataset.open_digest``), so that it pickles by name.
Opener = Callable[[str, str], Source]


def check_align(align: str) -> Align:
    if align == "snapshot":
        return "snapshot"
    if align == "view":
        return "view"
    raise InvalidInputError(
        f"unknown align {align!r}; choose 'snapshot' (one entry per snapshot row, -1 where the "
        "view removes the row) or 'view' (the view's rows only)"
    )


def is_image(example_id: str) -> bool:
    return os.path.splitext(example_id)[1].lower() in IMAGE_SUFFIXES


def decode_image(data: bytes, example_id: str, *, mode: str | None) -> Any:
    """A Pillow image of a payload's bytes (converted to ``mode`` unless ``None``)."""
    import io

    from PIL import Image, UnidentifiedImageError  # the torch extra's (Dataset.to_torch)

    try:
        img = Image.open(io.BytesIO(data))
        img.load()
    except (UnidentifiedImageError, OSError, ValueError) as e:
        raise DatasetFormatError(
            f"the payload of {example_id!r} is not an image Pillow can decode ({e}); serve it as "
            "bytes by naming the example without an image suffix"
        ) from e
    return img.convert(mode) if mode is not None and img.mode != mode else img


# -- numpy and pandas ------------------------------------------------------------------------------


def labels_array(ds: Source, align: str = "snapshot") -> np.ndarray:
    """The view's labels as an int64 vector: ``snapshot``-aligned (one entry per snapshot row,
    -1 for the rows the view removes; what evaluation scripts indexed by the test set's order
    expect) or ``view``-aligned (the view's rows, in snapshot order)."""
    which = check_align(align)
    v = ds.view_rows()
    if which == "view":
        return np.asarray(v.label, dtype=np.int64).copy()
    out = np.full(ds.snapshot.rows, -1, dtype=np.int64)
    out[v.rows] = v.label
    return out


def to_pandas(ds: Source, *, review: bool = False) -> pd.DataFrame:
    """``ds.labels(review=review)`` as a pandas DataFrame (pandas' own Arrow conversion)."""
    require("pandas", "Dataset.to_pandas")
    frame: pd.DataFrame = ds.labels(review=review).to_pandas()
    return frame


def to_polars(ds: Source, *, review: bool = False) -> pl.DataFrame:
    """``ds.labels(review=review)`` as a polars DataFrame (names and verdicts: ``Categorical``;
    label sets and counts: ``List(Int32)``)."""
    require("polars", "Dataset.to_polars")
    import polars

    frame = polars.from_arrow(ds.labels(review=review))
    assert isinstance(frame, polars.DataFrame)  # a table gives a frame, never a series
    return frame


def rated_array(name: str, lists: pa.Array | pa.ChunkedArray, k: int) -> np.ndarray:
    """Served ``labels`` or ``label_counts`` lists as an ``(m, k)`` array: the counts as int32
    (a row of ``label_counts``), a label set as int8 multi-hot (1 for each label in it); -1 in
    every column of a row that holds none (null). What ``to_torch`` targets and ``dsreg
    export --format npy`` write."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from dsreg.formats.tables import as_numpy

    if isinstance(lists, pa.ChunkedArray):
        lists = pa.concat_arrays(lists.chunks) if lists.num_chunks else pa.array([], lists.type)
    m = len(lists)
    valid = as_numpy(lists.is_valid()) if m else np.zeros(0, dtype=bool)
    lengths = as_numpy(pc.list_value_length(lists), fill=0).astype(np.int64)
    values = as_numpy(pc.list_flatten(lists).cast(pa.int32()))
    if name == "label_counts":
        out = np.full((m, k), -1, dtype=np.int32)
        out[valid] = values.reshape(-1, k) if len(values) else 0
        return out
    hot = np.zeros((m, k), dtype=np.int8)
    hot[np.repeat(np.arange(m), lengths), values] = 1
    hot[~valid] = -1
    return hot


# -- Hugging Face datasets -----------------------------------------------------------------------


def _hf_rows(root: str, digest: str, kind: str, reopen: Opener) -> Iterator[dict[str, Any]]:
    """The rows of ``to_hf``, read in the generator so that ``datasets`` can fingerprint it by
    its arguments (registry, revision digest) and cache it: a digest names the same rows."""
    ds = reopen(root, digest)
    store = ds.registry.store
    labels = ds.labels()
    blobs = labels.column("blob")
    table = labels.drop_columns(["blob", "size"])
    start = 0
    for batch in table.to_batches(max_chunksize=1024):
        for j, row in enumerate(batch.to_pylist()):
            blob = blobs[start + j].as_py()
            if kind == "image":
                row["image"] = {"bytes": store.read_bytes(blob), "path": row["example_id"]}
            elif kind == "binary":
                row["payload"] = store.read_bytes(blob)
            yield row
        start += batch.num_rows


def to_hf(ds: Source, *, reopen: Opener, cache_dir: str | os.PathLike[str] | None = None) -> Any:
    """A ``datasets.Dataset`` of the view: ``label`` and ``given_label`` as ``ClassLabel`` with
    the snapshot's class names (``labels``, the label sets, as a list of them; the raters'
    ``label_counts`` as a list of one count per class), ``image``
    (an ``Image`` feature) when every payload is an image, else ``payload`` (bytes) when there
    are payloads; then the other columns of ``ds.labels()``. Payload bytes are verified as they
    are read into the Arrow file that ``datasets`` writes under ``cache_dir`` (default: its own
    cache)."""
    require("hf", "Dataset.to_hf")
    import datasets

    t = ds.labels()
    blobs = t.column("blob")
    kind = "none"
    if blobs.null_count < len(blobs):
        if blobs.null_count:
            raise DatasetFormatError(
                f"{ds.name} has payloads for some rows only; to_hf needs all or none"
            )
        ids = t.column("example_id").to_pylist()
        kind = "image" if ids and all(is_image(i) for i in ids) else "binary"
    names = list(ds.classes)
    features = datasets.Features.from_arrow_schema(t.drop_columns(["blob", "size"]).schema)
    features["label"] = datasets.ClassLabel(names=names)
    features["given_label"] = datasets.ClassLabel(names=names)
    if "labels" in features:  # label sets: the multilabel view's, or the overlays'
        features["labels"] = datasets.Sequence(datasets.ClassLabel(names=names))
    if "label_counts" in features:  # the raters' counts, one per class
        features["label_counts"] = datasets.Sequence(datasets.Value("int32"))
    if kind == "image":
        features["image"] = datasets.Image()
    elif kind == "binary":
        features["payload"] = datasets.Value("binary")
    if not t.num_rows:  # no row to generate, which from_generator refuses
        return datasets.Dataset.from_dict({name: [] for name in features}, features=features)
    from datasets.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    # The library never prints: no progress bar of datasets' own while it is built.
    was_disabled = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        out = datasets.Dataset.from_generator(
            _hf_rows,
            features=features,
            gen_kwargs={
                "root": str(ds.registry.root),
                "digest": ds.digest,
                "kind": kind,
                "reopen": reopen,
            },
            cache_dir=os.fspath(cache_dir) if cache_dir is not None else None,
        )
    finally:
        if not was_disabled:
            enable_progress_bars()
    return out

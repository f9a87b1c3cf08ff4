"""Published relabelings in, the corrections table of a ``validated`` overlay out.

Pure logic over arrays, like ``votes``: the caller passes the snapshot's example ids, labels and
classes and stores what comes back. Two published formats:

- ``real`` (ImageNet-ReaL, Beyer et al. 2020, ``real.json``): one list of class indices per
  validation image, in file-name order. A row whose list holds its given label is
  ``non_error``; a list of exactly one other label is ``correctable`` (that label suggested);
  several labels without the given one ``multi_label``; an empty list ``neither``. Every row
  keeps its whole list in ``labels``, so the multilabel view's set accuracy is ReaL accuracy.
- ``counts`` (CIFAR-10H, Peterson et al. 2019, ``cifar10h-counts.npy``): an n x k array of
  rater counts. With a threshold share t: the given label's share >= t is ``non_error``,
  another label's share >= t is ``correctable`` (it suggested), else ``non_agreement``; every
  row keeps its distribution in ``label_counts`` (the classes with a count above 0).

Rows are matched to the file by ImageNet validation file name when every example id ends in
one (whatever the folders or the row order), else by position; a file of another length than
the snapshot is refused. Everything is vectorised: no Python per row beyond parsing the JSON.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow as pa

from dsreg._util.inputs import input_file, shown
from dsreg._util.jsonread import load_file
from dsreg.errors import RelabelingError
from dsreg.formats.arrays import from_numpy, string_array
from dsreg.formats.corrections import LABEL_COUNTS_TYPE, LabelSets, corrections_table
from dsreg.formats.inputfiles import open_npy, refuse_duplicate_columns
from dsreg.formats.tables import as_numpy
from dsreg.overlays.match import imagenet_val_numbers

__all__ = ["LabelImport", "counts_table", "import_counts", "import_real", "real_verdicts"]

# Verdict codes of the two rules, in this order.
_NAMES: Final = ("non_error", "correctable", "multi_label", "neither", "non_agreement")
_NON_ERROR, _CORRECTABLE, _MULTI, _NEITHER, _NON_AGREEMENT = range(5)


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelImport:
    """The corrections of an imported relabeling, ready to be stored.

    Attributes
    ----------
    table : pyarrow.Table
        One row per snapshot row the file speaks of, sorted by ``row``, in the version 2
        layout (``labels``, ``label_counts``).
    summary : dict
        ``checked`` (rows), ``match`` (how rows were matched), ``errors`` and one count per
        verdict of the rule, every one present even when 0.
    params : dict
        Provenance for the overlay's producer: ``format``, ``match`` and the rule's parameters.
    """

    table: pa.Table
    summary: dict[str, Any]
    params: dict[str, Any]


def _positions(example_ids: pa.Array, length: int, path: Path, what: str) -> tuple[np.ndarray, str]:
    """For each snapshot row, its position in a file of ``length`` entries, and the match used."""
    n = len(example_ids)
    numbers = imagenet_val_numbers(example_ids)
    if length != n:
        raise RelabelingError(
            f"{path} holds {length} {what}, but the snapshot has {n} rows; a relabeling must "
            "speak of every row (ImageNet-ReaL's real.json has 50,000 lists, CIFAR-10H's "
            "counts 10,000 rows): import it onto the snapshot it was made for"
        )
    if numbers is not None and numbers.min() >= 1 and numbers.max() <= length:
        return numbers - 1, "file_name"
    return np.arange(n, dtype=np.int64), "position"


def _summary(codes: np.ndarray, names: Sequence[str], match: str) -> dict[str, Any]:
    counts = np.bincount(codes, minlength=len(_NAMES))
    out: dict[str, Any] = {"checked": len(codes), "match": match}
    out["errors"] = int(len(codes) - counts[_NON_ERROR])
    out |= {name: int(counts[_NAMES.index(name)]) for name in names}
    return out


_NAME_ARRAY = string_array(_NAMES)


def _verdict_strings(codes: np.ndarray) -> pa.Array:
    return pa.DictionaryArray.from_arrays(from_numpy(codes, pa.int8()), _NAME_ARRAY).cast(
        pa.string()
    )


# -- ImageNet-ReaL --------------------------------------------------------------------------------


def _read_real(path: Path, k: int) -> pa.ListArray:
    hint = "; real.json is a JSON list of lists of class indices"
    data = load_file(path, what=f"real file {str(path)!r}", error=RelabelingError, hint=hint)
    if not isinstance(data, list) or not all(isinstance(x, list) for x in data):
        raise RelabelingError(
            f"{path} is not a JSON list of lists of class indices (ImageNet-ReaL's real.json)"
        )
    # Flattened in C (itertools.chain, np.fromiter); the type check is the one pass in Python.
    lengths = np.fromiter(map(len, data), dtype=np.int64, count=len(data))
    flat_list = list(itertools.chain.from_iterable(data))
    if not all(type(x) is int for x in flat_list):
        bad = next(x for x in flat_list if type(x) is not int)
        raise RelabelingError(f"{path} holds {shown(bad)}, not a class index; is it real.json?")
    # Checked as Python ints, before numpy holds them: an index of 4,000 digits is out of range,
    # not an overflow.
    if flat_list and (min(flat_list) < 0 or max(flat_list) >= k):
        bad_values = [shown(x) for x in flat_list if not 0 <= x < k][:5]
        raise RelabelingError(
            f"{path} names classes outside the snapshot's [0, {k}), first "
            f"[{', '.join(bad_values)}]; is it the relabeling of this dataset?"
        )
    flat = np.fromiter(flat_list, dtype=np.int64, count=len(flat_list))
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    lists = pa.ListArray.from_arrays(from_numpy(offsets, pa.int32()), from_numpy(flat, pa.int32()))
    return lists


def real_verdicts(given: np.ndarray, lists: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
    """The ReaL rule per row: (verdict code, suggested label or -1). ``lists[i]`` is row i's."""
    n = len(given)
    offsets = as_numpy(lists.offsets).astype(np.int64)
    lengths = np.diff(offsets)
    values = as_numpy(lists.values).astype(np.int64) if len(lists.values) else np.empty(0, np.int64)
    flat = values[offsets[0] : offsets[-1]]
    parent = np.repeat(np.arange(n), lengths)
    contains = np.bincount(parent[flat == given[parent]], minlength=n) > 0
    codes = np.full(n, _MULTI, dtype=np.int64)
    codes[lengths == 1] = _CORRECTABLE
    codes[lengths == 0] = _NEITHER
    codes[contains] = _NON_ERROR
    suggested = np.full(n, -1, dtype=np.int64)
    one = codes == _CORRECTABLE
    suggested[one] = flat[offsets[:-1][one] - offsets[0]]
    return codes, suggested


def import_real(
    path: Path, *, example_ids: pa.Array, labels: np.ndarray, classes: Sequence[str]
) -> LabelImport:
    """ImageNet-ReaL's ``real.json`` as the corrections of every snapshot row."""
    lists = _read_real(path, len(classes))
    pos, match = _positions(example_ids, len(lists), path, "label lists")
    lists = lists.take(from_numpy(pos, pa.int64()))
    codes, suggested = real_verdicts(np.asarray(labels, dtype=np.int64), lists)
    n = len(labels)
    table = corrections_table(
        rows=np.arange(n, dtype=np.int64),
        example_ids=example_ids,
        given_label=labels,
        suggested_label=suggested,
        verdict=_verdict_strings(codes),
        label_sets=LabelSets(labels=lists),
    )
    names = ("non_error", "correctable", "multi_label", "neither")
    return LabelImport(
        table=table,
        summary=_summary(codes, names, match),
        params={"format": "real", "match": match},
    )


# -- CIFAR-10H ------------------------------------------------------------------------------------


def _parquet_counts(path: Path, classes: Sequence[str], what: str) -> np.ndarray:
    import pyarrow.parquet as pq

    try:
        t = pq.ParquetFile(path).read()
    except (OSError, pa.ArrowException) as e:
        raise RelabelingError(f"cannot read {what}: {e}") from e
    refuse_duplicate_columns(t.column_names, what=what, error=RelabelingError)
    cols = list(classes) if all(c in t.column_names for c in classes) else t.column_names
    if not cols:
        raise RelabelingError(f"{what} has no columns; give one column of counts per class")
    try:
        return np.column_stack([as_numpy(t.column(c)) for c in cols])
    except (ValueError, TypeError, pa.ArrowException) as e:
        raise RelabelingError(f"cannot read {what} as counts: {e}") from e


def _read_counts(path: Path, classes: Sequence[str]) -> np.ndarray:
    k = len(classes)
    what = f"counts file {str(path)!r}"
    input_file(path, what=what)
    suffix = path.suffix.lower()
    if suffix == ".npy":
        hint = "; save the counts with numpy.save"
        arr = open_npy(path, what=what, error=RelabelingError, hint=hint)
    elif suffix == ".parquet":
        arr = _parquet_counts(path, classes, what)
    else:
        raise RelabelingError(f"{what} has an unknown type {suffix!r}; use .npy or .parquet")
    if arr.ndim != 2 or arr.shape[1] != k or arr.dtype.kind not in "iuf":
        raise RelabelingError(
            f"{what} holds a {arr.dtype} array of shape {arr.shape}; give "
            f"rows x classes = (n, {k}) rater counts, classes in the snapshot's order"
        )
    if arr.dtype.kind == "f":
        # In float64 before any check: a float16 compared with 2^31 would overflow (a warning).
        arr = np.asarray(arr, dtype=np.float64)
        if not np.isfinite(arr).all() or (arr != np.round(arr)).any():
            raise RelabelingError(
                f"{what} holds fractions: give the raters' counts (CIFAR-10H's "
                "cifar10h-counts.npy), not probabilities, so no rater is lost"
            )
    if arr.size and (arr.min() < 0 or arr.max() > np.iinfo(np.int32).max):
        raise RelabelingError(f"{what} holds counts below 0 or above 2^31")
    return np.asarray(arr, dtype=np.int64)


def counts_table(counts: np.ndarray) -> pa.ListArray:
    """Each row's distribution as ``label_counts``: a ``{label, count}`` per class counted."""
    n = counts.shape[0]
    nz_rows, nz_labels = np.nonzero(counts)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(nz_rows, minlength=n), out=offsets[1:])
    items = pa.StructArray.from_arrays(
        [
            from_numpy(nz_labels, pa.int32()),
            from_numpy(counts[nz_rows, nz_labels], pa.int32()),
        ],
        fields=list(LABEL_COUNTS_TYPE.value_type),
    )
    return pa.ListArray.from_arrays(from_numpy(offsets, pa.int32()), items, type=LABEL_COUNTS_TYPE)


def import_counts(
    path: Path,
    *,
    example_ids: pa.Array,
    labels: np.ndarray,
    classes: Sequence[str],
    threshold: float = 0.5,
) -> LabelImport:
    """Rater counts (CIFAR-10H's ``cifar10h-counts.npy``) as the corrections of every row with
    at least one rater."""
    if not 0 < threshold <= 1:
        raise RelabelingError(
            f"--threshold {threshold} is not a share of raters; give a number in (0, 1]"
        )
    raw = _read_counts(path, classes)
    pos, match = _positions(example_ids, len(raw), path, "rows of counts")
    counts = raw[pos]
    given = np.asarray(labels, dtype=np.int64)
    n = len(given)
    total = counts.sum(axis=1)
    rated = total > 0
    share = counts / np.where(rated, total, 1)[:, None]
    given_share = share[np.arange(n), given]
    others = share.copy()
    others[np.arange(n), given] = -1.0
    best = np.argmax(others, axis=1)  # the first of equal shares, as argmax does
    codes = np.full(n, _NON_AGREEMENT, dtype=np.int64)
    codes[others[np.arange(n), best] >= threshold] = _CORRECTABLE
    codes[given_share >= threshold] = _NON_ERROR
    suggested = np.where(codes == _CORRECTABLE, best, -1)
    keep = np.flatnonzero(rated)
    table = corrections_table(
        rows=keep,
        example_ids=example_ids.take(from_numpy(keep, pa.int64())),
        given_label=labels[keep],
        suggested_label=suggested[keep],
        verdict=_verdict_strings(codes[keep]),
        label_sets=LabelSets(label_counts=counts_table(counts[keep])),
    )
    raters = np.unique(total[rated])
    params: dict[str, Any] = {
        "format": "counts",
        "match": match,
        "threshold": float(threshold),
        "raters": int(raters[0]) if len(raters) == 1 else None,
    }
    summary = _summary(codes[keep], ("non_error", "correctable", "non_agreement"), match)
    summary["unrated"] = int(n - len(keep))
    return LabelImport(table=table, summary=summary, params=params)

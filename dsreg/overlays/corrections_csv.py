"""A user's own corrections as CSV, in (a ``manual`` overlay) and out (``dsreg overlay export``).

Columns, in any order (a header line names them):

- ``row`` (a snapshot position) or ``example_id`` (or both, then they must agree): which row;
- ``given_label`` (optional): the snapshot's label at that row, index or class name, checked;
- ``suggested_label`` (optional): a class index or a class name; empty for none;
- ``verdict`` (optional): one of the verdicts; an empty cell means ``correctable`` where a label
  is suggested;
- ``labels`` (optional): every label that fits, indices or names joined by ``;``; an empty cell
  is no list, ``[]`` the empty list;
- ``label_counts`` (optional): ``label:count`` pairs joined by ``;`` (same empty cells).

Export writes ``row``, ``example_id``, ``given_label``, ``suggested_label`` and ``verdict``
(plus ``labels`` and ``label_counts`` for a version 2 overlay) as class indices, which import
reads back to the same table: a csv overlay exported and imported again has the same digest.
Scores and votes are not exported (a ``manual`` overlay holds neither).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from dsreg._util.inputs import input_file, shown_all
from dsreg.errors import RelabelingError
from dsreg.formats.corrections import (
    LABEL_COUNTS_TYPE,
    LABELS_TYPE,
    LabelSets,
    corrections_table,
)
from dsreg.formats.inputfiles import (
    CSV_BLOCK,
    check_digit_cells,
    csv_error,
    refuse_duplicate_columns,
)
from dsreg.formats.manifests import SUMMARIZED_VERDICTS, VERDICTS
from dsreg.formats.tables import as_numpy
from dsreg.overlays.match import rows_by_id
from dsreg.overlays.relabel import LabelImport

__all__ = ["export_csv", "import_csv"]

_COLUMNS = (
    "row",
    "example_id",
    "given_label",
    "suggested_label",
    "verdict",
    "labels",
    "label_counts",
)


def _read(path: Path) -> pa.Table:
    input_file(path, what=f"corrections file {str(path)!r}")
    try:
        opts = pacsv.ConvertOptions(
            column_types={c: pa.string() for c in _COLUMNS},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        )
        read = pacsv.ReadOptions(block_size=CSV_BLOCK)
        table = pacsv.read_csv(path, read_options=read, convert_options=opts)
        table.column_names  # noqa: B018 - decoded here: a header need not be UTF-8
    except (pa.ArrowException, OSError, UnicodeDecodeError) as e:
        raise RelabelingError(f"cannot read {path} as CSV: {csv_error(e, block=CSV_BLOCK)}") from e
    refuse_duplicate_columns(table.column_names, what=str(path), error=RelabelingError)
    unknown = [c for c in table.column_names if c not in _COLUMNS]
    if unknown:
        raise RelabelingError(
            f"{path} has columns {unknown} dsreg does not read; the columns are "
            f"{', '.join(_COLUMNS)}"
        )
    if "row" not in table.column_names and "example_id" not in table.column_names:
        raise RelabelingError(f"{path} needs a 'row' or an 'example_id' column to name each row")
    return table


def _labels_of(cells: pa.Array, classes: Sequence[str], what: str) -> np.ndarray:
    """Class indices from cells of digits or class names; refuses anything else."""
    digits = pc.match_substring_regex(cells, r"^[0-9]+$")
    check_digit_cells(cells.filter(digits), what=what, error=RelabelingError)
    idx = pc.index_in(cells, value_set=pa.array(list(classes), pa.string()))
    k = len(classes)
    as_int = pc.cast(pc.if_else(digits, cells, pa.scalar("0")), pa.int64())
    bad_int = pc.and_(digits, pc.greater_equal(as_int, k))
    unknown = pc.and_(pc.invert(digits), pc.is_null(idx))
    bad = pc.or_(bad_int, unknown)
    if pc.any(bad).as_py():
        first = shown_all(cells.filter(bad)[:5].to_pylist())
        raise RelabelingError(
            f"{what} names classes the snapshot does not have, first {first}; give a class "
            f"index in [0, {k}) or a class name"
        )
    return as_numpy(pc.if_else(digits, as_int, pc.cast(idx, pa.int64()))).astype(np.int64)


def _nullable_labels(col: pa.Array, classes: Sequence[str], what: str) -> np.ndarray:
    empty = pc.equal(col, "")
    vals = _labels_of(col.filter(pc.invert(empty)), classes, what)
    out = np.full(len(col), -1, dtype=np.int64)
    out[~as_numpy(empty)] = vals
    return out


def _lists(col: pa.Array, classes: Sequence[str], what: str, counts: bool) -> pa.Array:
    """``a;b`` cells as lists (``[]`` empty, an empty cell none); with ``counts``, each item is
    ``label:count``."""
    none = pc.equal(col, "")
    empty = pc.equal(col, "[]")
    text = pc.if_else(pc.or_(none, empty), pa.scalar(None, pa.string()), col)
    parts = pc.split_pattern(text, ";")
    flat = pc.list_flatten(parts)
    parent_len = pc.fill_null(pc.list_value_length(parts), 0)
    offsets = np.zeros(len(col) + 1, dtype=np.int32)
    np.cumsum(as_numpy(parent_len), out=offsets[1:])
    mask = pa.array(as_numpy(none))
    if counts:
        pair = pc.split_pattern(flat, ":")
        ok = pc.equal(pc.list_value_length(pair), 2)
        if len(flat) and not pc.all(ok).as_py():
            bad = shown_all(flat.filter(pc.invert(ok))[:5].to_pylist())
            raise RelabelingError(f"{what}: items must be label:count, first {bad}")
        labels = _labels_of(pc.list_element(pair, 0), classes, what)
        cnt_text = pc.list_element(pair, 1)
        if len(flat) and not pc.all(pc.match_substring_regex(cnt_text, r"^[0-9]+$")).as_py():
            raise RelabelingError(f"{what}: counts must be whole numbers of raters (>= 0)")
        # int32 counts: nine digits always fit.
        check_digit_cells(cnt_text, what=what, error=RelabelingError, digits=9)
        items = pa.StructArray.from_arrays(
            [pa.array(labels.astype(np.int32)), pc.cast(cnt_text, pa.int32())],
            fields=list(LABEL_COUNTS_TYPE.value_type),
        )
        return pa.ListArray.from_arrays(pa.array(offsets), items, mask=mask).cast(LABEL_COUNTS_TYPE)
    values = pa.array(_labels_of(flat, classes, what).astype(np.int32))
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=mask).cast(LABELS_TYPE)


def import_csv(
    path: Path, *, example_ids: pa.Array, labels: np.ndarray, classes: Sequence[str]
) -> LabelImport:
    """A corrections CSV as the corrections table of a ``manual`` overlay."""
    t = _read(path)
    names = t.column_names
    col = {c: t.column(c).combine_chunks() for c in names}
    what = f"{path}"
    if "row" in names:
        rows = _rows_by_position(what, col, example_ids, len(labels))
        match = "row"
    else:
        rows = rows_by_id(example_ids, col["example_id"])
        if (rows < 0).any():
            unknown = col["example_id"].filter(pa.array(rows < 0))[:5].to_pylist()
            raise RelabelingError(
                f"{what}: {int((rows < 0).sum())} example ids are not in the snapshot, first "
                f"{shown_all(unknown)}"
            )
        match = "example_id"
    given = np.asarray(labels, dtype=np.int64)[rows]
    if "given_label" in names:
        stated = _labels_of(col["given_label"], classes, f"{what} (given_label)")
        wrong = np.flatnonzero(stated != given)
        if len(wrong):
            raise RelabelingError(
                f"{what}: {len(wrong)} lines give a label that is not the snapshot's, first "
                f"rows {rows[wrong[:5]].tolist()}; is the file about this snapshot?"
            )
    sug = (
        _nullable_labels(col["suggested_label"], classes, f"{what} (suggested_label)")
        if "suggested_label" in names
        else np.full(len(rows), -1, dtype=np.int64)
    )
    verdict = _verdicts(what, col.get("verdict"), sug)
    lists = _lists(col["labels"], classes, f"{what} (labels)", False) if "labels" in names else None
    counts = (
        _lists(col["label_counts"], classes, f"{what} (label_counts)", True)
        if "label_counts" in names
        else None
    )
    table = corrections_table(
        rows=rows,
        example_ids=example_ids.take(pa.array(rows)),
        given_label=given,
        suggested_label=sug,
        verdict=verdict,
        label_sets=LabelSets(lists, counts),
    )
    counted = pc.value_counts(table.column("verdict"))
    vc = dict(
        zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist(), strict=True)
    )
    summary: dict[str, Any] = {"checked": table.num_rows, "match": match}
    summary["errors"] = table.num_rows - int(vc.get("non_error", 0) + vc.get("unreviewed", 0))
    summary |= {v: int(vc.get(v, 0)) for v in VERDICTS if v in vc or v in SUMMARIZED_VERDICTS}
    return LabelImport(table=table, summary=summary, params={"format": "csv", "match": match})


def _rows_by_position(
    what: str, col: dict[str, pa.Array], example_ids: pa.Array, n: int
) -> np.ndarray:
    """The rows the ``row`` column names, each within the snapshot's ``n`` rows and, where the
    file also has an ``example_id`` column, holding that id."""
    cells = col["row"]
    if not pc.all(pc.match_substring_regex(cells, r"^[0-9]+$")).as_py() and len(cells):
        raise RelabelingError(f"{what}: the 'row' column must hold row positions (digits)")
    check_digit_cells(cells, what=f"{what}: the 'row' column", error=RelabelingError)
    rows = as_numpy(pc.cast(cells, pa.int64())).astype(np.int64)
    bad = rows[(rows < 0) | (rows >= n)]
    if len(bad):
        raise RelabelingError(f"{what}: rows {bad[:5].tolist()} are outside [0, {n})")
    if "example_id" in col:
        want = example_ids.take(pa.array(rows))
        diff = np.flatnonzero(~as_numpy(pc.equal(want, col["example_id"])))
        if len(diff):
            first = [(int(rows[i]), col["example_id"][int(i)].as_py()) for i in diff[:3]]
            raise RelabelingError(
                f"{what}: {len(diff)} lines name an example_id that is not the snapshot's "
                f"at their row, first (row, example_id) {shown_all(first)}"
            )
    return rows


def _verdicts(what: str, verdict: pa.Array | None, sug: np.ndarray) -> pa.Array:
    """Each line's verdict: as the ``verdict`` column says, ``correctable`` where it is blank
    (or absent), which needs a suggested label; any other word is refused."""
    if verdict is not None:
        blank = as_numpy(pc.equal(verdict, ""))
        if (blank & (sug < 0)).any():
            raise RelabelingError(
                f"{what}: lines without a verdict need a suggested_label (they are correctable)"
            )
        verdict = pc.if_else(pa.array(blank), pa.scalar("correctable"), verdict)
    elif (sug < 0).any():
        raise RelabelingError(
            f"{what} has no 'verdict' column, and some lines suggest no label; give a verdict "
            f"({', '.join(VERDICTS)})"
        )
    else:
        verdict = pa.array(["correctable"] * len(sug), pa.string())
    unknown = pc.invert(pc.is_in(verdict, value_set=pa.array(VERDICTS)))
    if pc.any(unknown).as_py():
        bad = pc.unique(verdict.filter(unknown)).to_pylist()
        raise RelabelingError(
            f"{what}: unknown verdicts {shown_all(bad[:5])}; use {', '.join(VERDICTS)}"
        )
    return verdict


def _joined(lists: pa.Array) -> pa.Array:
    """List cells as text: items joined by ``;``, ``[]`` for an empty list, empty for none."""
    lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
    text = pc.binary_join(lists, ";")
    return pc.fill_null(
        pc.if_else(pc.equal(pc.list_value_length(lists), 0), pa.scalar("[]"), text), ""
    )


def export_csv(table: pa.Table) -> bytes:
    """A corrections table as the CSV ``import_csv`` reads back to the same table."""

    def text(name: str) -> pa.Array:
        return pc.fill_null(pc.cast(table.column(name), pa.string()), "")

    cols: dict[str, Any] = {
        "row": text("row"),
        "example_id": table.column("example_id"),
        "given_label": text("given_label"),
        "suggested_label": text("suggested_label"),
        "verdict": table.column("verdict"),
    }
    if "labels" in table.column_names:
        lab = table.column("labels").combine_chunks()
        cols["labels"] = _joined(pc.cast(lab, pa.list_(pa.string())))
        lc = table.column("label_counts").combine_chunks()
        flat = pc.list_flatten(lc)
        pairs = pc.binary_join_element_wise(
            pc.cast(pc.struct_field(flat, "label"), pa.string()),
            pc.cast(pc.struct_field(flat, "count"), pa.string()),
            ":",
        )
        rebuilt = pa.ListArray.from_arrays(
            pc.subtract(lc.offsets, lc.offsets[0]), pairs, mask=pc.is_null(lc)
        )
        cols["label_counts"] = _joined(rebuilt)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")  # quotes a cell only where it needs it
    w.writerow(list(cols))
    w.writerows(zip(*(c.to_pylist() for c in cols.values()), strict=True))
    return buf.getvalue().encode("utf-8")

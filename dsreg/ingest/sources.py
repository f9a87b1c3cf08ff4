"""Read a source (an ImageFolder tree, a label file, a table) into an examples table.

Nothing here writes to a registry: every check that can refuse the input runs first, so a
refused add leaves the registry as it was.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from dsreg._util.inputs import INPUT_BYTES, input_file, read_input, shown, shown_all
from dsreg.errors import DatasetFormatError, InputPathError
from dsreg.formats.inputfiles import csv_error, open_npy, out_of_range, refuse_duplicate_columns
from dsreg.formats.names import check_lookalike_ids, is_safe_relpath
from dsreg.formats.tables import check_metadata_names
from dsreg.ingest.payloads import Payload, tree_payloads
from dsreg.ingest.treescan import TreeScan, scan_tree

__all__ = [
    "Payload",
    "Source",
    "check_example_id",
    "class_names",
    "imagefolder_source",
    "map_label_npy",
    "read_classes",
    "scan_imagefolder",
    "scan_labels",
    "scan_table",
    "table_errors",
    "table_ids",
]

# Without a classes file, integer labels name the classes 0..max. More classes than rows is
# allowed up to this many (ImageNet-21k has 21,841): a label far beyond it is a wrong file, and
# naming its classes would cost gigabytes.
MAX_INFERRED_CLASSES = 100_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """An examples table before payloads are hashed: ``payloads[i]`` belongs to row i (or None).
    ``task`` and ``normalization``: the snapshot's (``formats.manifests.Snapshot``)."""

    ids: list[str]
    labels: np.ndarray
    classes: tuple[str, ...]
    payloads: list[Payload | None]
    metadata: pa.Table | None
    provenance: dict[str, Any] = field(default_factory=dict)
    task: str = "multiclass"
    normalization: str | None = None


def check_example_id(example_id: str, *, what: str = "example id") -> str:
    """Refuse ids that could escape a checkout: empty, absolute, ``..``, backslashes, NUL
    (``model.names.UNSAFE_PATH``, the rule every read path checks again)."""
    if not is_safe_relpath(example_id):
        raise InputPathError(
            f"{what} {shown(example_id)} is unsafe: ids are relative POSIX paths without '..', "
            "'.', a leading '/' or backslashes; rename it in the source"
        )
    return example_id


def read_classes(path: Path) -> tuple[str, ...]:
    """One class name per line; line i is class i. Lines end at ``\n`` (or ``\r\n``) only:
    a name may hold any other character ``str.splitlines`` would break it at (U+2028, U+0085,
    a form feed), as a name read from a table's label column may."""
    what = f"classes file {str(path)!r}"
    data = read_input(path, what=what, max_bytes=INPUT_BYTES, error=DatasetFormatError)
    try:
        lines = [line.removesuffix("\r") for line in data.decode("utf-8").split("\n")]
    except UnicodeDecodeError as e:
        raise DatasetFormatError(f"cannot read {what}: {e}") from e
    while lines and not lines[-1].strip():
        lines.pop()
    names = [ln.strip() for ln in lines]
    if not names:
        raise DatasetFormatError(f"classes file {str(path)!r} is empty; write one name per line")
    for i, n in enumerate(names):
        if not n:
            raise DatasetFormatError(
                f"classes file {str(path)!r} has an empty line {i + 1}; every line names a class"
            )
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise DatasetFormatError(f"classes file {str(path)!r} names {dup} more than once")
    return tuple(names)


def class_names(classes: str | os.PathLike[str] | Sequence[str] | None) -> Sequence[str] | None:
    """The class names ``--classes`` gives: a list as it is, a file read (``read_classes``)."""
    if classes is None or not isinstance(classes, str | os.PathLike):
        return classes
    return read_classes(Path(classes))


def _payload(path: Path | str, st: os.stat_result) -> Payload:
    return Payload(path, st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def scan_imagefolder(root: Path) -> Source:
    """One folder per class (sorted by name, as torchvision's ImageFolder), files below it.

    Example ids are paths relative to ``root``. Hidden entries (``.name``) are skipped;
    symbolic links are followed when they stay inside the tree and refused when they leave it.
    """
    return imagefolder_source(scan_tree(root))


def imagefolder_source(scan: TreeScan, payloads: list[Payload | None] | None = None) -> Source:
    """The source a ``scan_tree`` describes (``payloads``: ``tree_payloads(scan)``, if made)."""
    if payloads is None:
        payloads = tree_payloads(scan)
    return Source(
        ids=scan.ids,
        labels=np.asarray(scan.labels, dtype=np.int32),
        classes=scan.classes,
        payloads=payloads,
        metadata=None,
        provenance={"kind": "imagefolder"},
    )


def _check_dir_inside(d: Path, real_root: Path, rel: str) -> None:
    """Refuse a folder that is (or sits below) a symbolic link leading out of the tree."""
    target = d.resolve()
    if not target.is_relative_to(real_root):
        raise InputPathError(
            f"folder {rel!r} is a symbolic link to {str(target)!r}, outside the tree; "
            "copy its files into the tree or remove the link"
        )


def _stat_inside(p: Path, real_root: Path, rel: str) -> os.stat_result | None:
    lst = p.lstat()
    if stat.S_ISLNK(lst.st_mode):
        target = p.resolve()
        if not target.is_relative_to(real_root):
            raise InputPathError(
                f"{rel!r} is a symbolic link to {str(target)!r}, outside the tree; "
                "copy the file into the tree or remove the link"
            )
        if not target.exists():
            raise InputPathError(f"{rel!r} is a broken symbolic link; fix or remove it")
        st = p.stat()
    else:
        st = lst
    return st if stat.S_ISREG(st.st_mode) else None


@contextmanager
def table_errors(path: Path, what: str) -> Iterator[None]:
    """Errors reading the table ``path`` as one-line refusals: an unreadable file, or a column
    name that is not UTF-8 text."""
    try:
        yield
    except (pa.ArrowException, OSError) as e:
        raise DatasetFormatError(f"cannot read {what} {str(path)!r}: {csv_error(e)}") from e
    except UnicodeDecodeError as e:
        raise DatasetFormatError(
            f"{what} {str(path)!r} has a column name that is not UTF-8 text ({e.reason} at byte "
            f"{e.start}); save the file as UTF-8"
        ) from e


def _read_any_table(path: Path, what: str) -> pa.Table:
    input_file(path, what=f"{what} {str(path)!r}")
    with table_errors(path, what):
        if path.suffix.lower() == ".parquet":
            table = pq.read_table(path)
        elif path.suffix.lower() in (".csv", ".tsv", ".txt"):
            opts = pacsv.ParseOptions(delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
            table = pacsv.read_csv(path, parse_options=opts)
        else:
            raise DatasetFormatError(
                f"{what} {str(path)!r} has an unknown type {path.suffix!r}; use .parquet or .csv"
            )
        names = table.column_names  # decoded here: a CSV header need not be UTF-8
    refuse_duplicate_columns(names, what=f"{what} {str(path)!r}", error=DatasetFormatError)
    return table


def _labels_to_index(
    col: pa.ChunkedArray | pa.Array, classes: Sequence[str] | None, *, what: str
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Integer labels stay; string labels map through ``classes`` (or sorted unique names)."""
    if col.null_count:
        raise DatasetFormatError(f"{col.null_count} rows of {what} have no label; label every row")
    if len(col) == 0:
        raise DatasetFormatError(f"{what} holds no labels; a test set needs at least one row")
    if pa.types.is_integer(col.type):
        arr = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)
        if classes is None:
            k = int(arr.max()) + 1
            if k > max(len(arr), MAX_INFERRED_CLASSES):
                raise DatasetFormatError(
                    f"{what}: the largest label is {k - 1}, so without a classes file it would "
                    f"name {k:,} classes for {len(arr):,} rows; give --classes FILE naming "
                    "every class (one per line), or check the labels"
                )
        names = tuple(classes) if classes is not None else tuple(str(i) for i in range(k))
        _check_range(arr, len(names), what)
        return arr.astype(np.int32), names
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        values = col.to_pylist()
        names = tuple(classes) if classes is not None else tuple(sorted(set(values)))
        index = {n: i for i, n in enumerate(names)}
        unknown = sorted({v for v in values if v not in index})
        if unknown:
            raise DatasetFormatError(
                f"{what} has {len(unknown)} labels that name no class, first "
                f"{shown_all(unknown[:5])}; "
                "add them to the --classes file"
            )
        return np.fromiter((index[v] for v in values), dtype=np.int32, count=len(values)), names
    raise DatasetFormatError(
        f"{what} has labels of type {col.type}; use integers (class indices) or class names"
    )


def _check_range(arr: np.ndarray, k: int, what: str) -> None:
    bad = out_of_range(arr, k)
    if bad is not None:
        raise DatasetFormatError(
            f"{what}: {bad.total} labels are out of range [0, {k}), first {bad.first} at rows "
            f"{bad.at}; give a --classes file naming every class"
        )


def map_label_npy(path: Path, what: str) -> np.ndarray:
    """A ``.npy`` file of labels, memory-mapped: a 1-D array of integers, else a clear error.
    Its header is checked against the file's size before anything is mapped or allocated for
    it (``model.inputfiles.open_npy``); the caller reads it whole or a slice at a time."""
    arr = open_npy(
        path, what=what, error=DatasetFormatError, hint="; save the labels with numpy.save"
    )
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise DatasetFormatError(
            f"{what} holds a {arr.dtype} array of shape {arr.shape}; "
            "expected a 1-D array of integer class indices"
        )
    return arr


def scan_labels(path: Path, *, classes: Sequence[str] | None) -> Source:
    """A label-only set: ``.npy`` (1-D integers), or CSV/Parquet with one column or ``label``."""
    what = f"labels file {str(path)!r}"
    input_file(path, what=what)
    if path.suffix.lower() == ".npy":
        # Read whole once mapped and checked.
        arr = np.array(map_label_npy(path, what))
        col: pa.Array | pa.ChunkedArray = pa.array(arr.astype(np.int64))
        fmt = "npy"
    else:
        table = _read_any_table(path, "labels file")
        if "label" in table.column_names:
            col = table.column("label")
        elif table.num_columns == 1:
            col = table.column(0)
        else:
            raise DatasetFormatError(
                f"{what} has columns {table.column_names}; give one column, or one named 'label'"
            )
        fmt = path.suffix.lower().lstrip(".")
    labels, names = _labels_to_index(col, classes, what=what)
    n = len(labels)
    return Source(
        ids=[str(i) for i in range(n)],
        labels=labels,
        classes=names,
        payloads=[None] * n,
        metadata=None,
        provenance={"kind": "labels", "format": fmt},
    )


def scan_table(
    path: Path,
    *,
    id_column: str,
    label_column: str,
    classes: Sequence[str] | None,
    files: Path | None,
    allow_lookalike_ids: bool = False,
) -> Source:
    """A table of examples; payloads found as ``files / example_id`` when ``files`` is given.
    Ids of one spelling (``names.id_spelling``) are refused unless ``allow_lookalike_ids``."""
    if id_column == label_column:
        raise DatasetFormatError(
            f"--id-column and --label-column both name column {id_column!r}; the example ids "
            "and the labels must be two columns"
        )
    table = _read_any_table(path, "table")
    what = f"table {str(path)!r}"
    for col, flag in ((id_column, "--id-column"), (label_column, "--label-column")):
        if col not in table.column_names:
            raise DatasetFormatError(
                f"{what} has no column {col!r} ({flag}); its columns are {table.column_names}"
            )
    ids = table_ids(table.column(id_column), id_column, what=what)
    if not allow_lookalike_ids:
        check_lookalike_ids(ids, what=what)
    labels, names = _labels_to_index(table.column(label_column), classes, what=what)
    meta = table.drop_columns([id_column, label_column])
    # Before any payload is stored; check_examples checks again whatever builds the table.
    check_metadata_names(meta.column_names, what=what)
    payloads: list[Payload | None] = [None] * len(ids)
    if files is not None:
        payloads = _table_files(ids, files)
    return Source(
        ids=ids,
        labels=labels,
        classes=names,
        payloads=payloads,
        metadata=meta if meta.num_columns else None,
        provenance={
            "kind": "table",
            "id_column": id_column,
            "label_column": label_column,
            "files": files is not None,
        },
    )


def table_ids(ids_col: pa.ChunkedArray, id_column: str, *, what: str) -> list[str]:
    """The table's example ids as text, refused if one is missing, neither text nor an
    integer, not a valid id, or repeated: checked before add hashes or stores any payload,
    so a refused add writes nothing."""
    if ids_col.null_count:
        raise DatasetFormatError(f"{what}: {ids_col.null_count} rows have no {id_column!r}")
    try:
        ids = [str(v) for v in pc.cast(ids_col, pa.string()).to_pylist()]
    except pa.ArrowException as e:
        raise DatasetFormatError(
            f"{what}: column {id_column!r} holds {ids_col.type} values that are not text ({e}); "
            "example ids must be strings or integers"
        ) from e
    for eid in ids:
        check_example_id(eid)
    if len(set(ids)) != len(ids):
        dup = sorted(k for k, c in Counter(ids).items() if c > 1)
        raise DatasetFormatError(
            f"{what}: {len(dup)} example ids occur more than once, first {shown_all(dup[:5])}; "
            f"the {id_column!r} column must be unique"
        )
    return ids


def _table_files(ids: list[str], files: Path) -> list[Payload | None]:
    """Each example's file, ``files / example_id``; refuses a missing one, and one (or a folder
    on its way) that is a link out of ``files``."""
    if not files.exists():
        raise InputPathError(f"--files folder {str(files)!r} does not exist; check the path")
    real = files.resolve()
    payloads: list[Payload | None] = [None] * len(ids)
    missing = []
    parents_ok: set[str] = set()
    for i, eid in enumerate(ids):
        p = files / eid
        parent = eid.rpartition("/")[0]
        if parent and parent not in parents_ok:
            # A folder on the way may be a link out of --files; once per folder.
            _check_dir_inside(files / parent, real, parent)
            parents_ok.add(parent)
        try:
            st = _stat_inside(p, real, eid)
        except InputPathError:
            raise  # a FileNotFoundError too, but a refusal, not a missing file
        except (FileNotFoundError, NotADirectoryError):
            st = None  # missing, or a file where the id names a folder
        except OSError as e:  # a name too long, a loop of links, no permission
            raise InputPathError(
                f"cannot read the file of example {eid!r} under {str(files)!r}: "
                f"{e.strerror or e}; each example id must be a file path relative to --files",
                path=str(p),
            ) from e
        if st is None:
            missing.append(eid)
        else:
            payloads[i] = _payload(p, st)
    if missing:
        raise InputPathError(
            f"{len(missing)} examples have no file under {str(files)!r}, first "
            f"{missing[:5]}; each example id must be a file path relative to --files"
        )
    return payloads

"""The registry's Parquet tables, read back: re-hashed before they are parsed, checked against
the layout their manifest promises.

Both views and overlays read tables; they meet here, below both of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow._compute import MatchSubstringOptions, call_function

from dsreg._util.lazy import lazy_imports
from dsreg.errors import ManifestError, StorageError
from dsreg.formats.arrays import string_array
from dsreg.formats.corrections import LABEL_SET_VERSIONS, corrections_version
from dsreg.formats.manifests import VERDICTS, Overlay, Snapshot
from dsreg.formats.names import UNSAFE_PATH, is_safe_component
from dsreg.formats.tables import read_parquet_mapped
from dsreg.objects.digest import short
from dsreg.registry.folder import Registry

# Imported when first called: a command reading a table seldom needs it (0.1 s to import:
# it wraps each of pyarrow's hundreds of functions). The checks every read of an examples
# table makes call the few they need by name (``_call``), without it.
with lazy_imports():
    import pyarrow.compute as pc

__all__ = [
    "check_example_columns",
    "check_examples_against",
    "examples_parquet",
    "has_payloads",
    "is_tree",
    "map_examples",
    "read_corrections",
    "read_examples",
]

_DIGEST_RE = "^blake3:[0-9a-f]{64}$"


def read_examples(
    reg: Registry,
    snap: Snapshot,
    *,
    columns: Sequence[str] | None = None,
    keep: np.ndarray | None = None,
    data: pa.Buffer | None = None,
) -> pa.Table:
    """A snapshot's examples table, re-hashed before it is parsed, and checked against the
    manifest that names it (``check_examples_against``) before anyone indexes with it.

    ``keep`` (a boolean per snapshot row): only those rows, filtered as each row group is
    decoded (``read_parquet_mapped``); the row count checked is the file's, the columns'
    checks run on the rows read. ``data``: the object's bytes from ``map_examples`` (mapped
    and re-hashed once, for a reader that reads the table twice)."""
    if data is None:
        data = _mapped(reg, snap.examples)
    if keep is None:
        table = read_parquet_mapped(data, digest=snap.examples, columns=columns)
        check_examples_against(table, snap)
        return table
    if len(keep) != snap.rows:
        raise ManifestError(
            f"examples table {short(snap.examples)} of {snap.dataset!r}: {len(keep)} rows "
            f"selected of a snapshot of {snap.rows}"
        )
    table = read_parquet_mapped(data, digest=snap.examples, columns=columns, keep=keep)
    check_example_columns(table, snap)
    return table


def examples_parquet(reg: Registry, snap: Snapshot) -> tuple[pa.Buffer, pq.ParquetFile]:
    """A snapshot's examples table to read a row group or a batch at a time: its bytes
    memory-mapped and re-hashed first, and a reader over them whose row count is the
    manifest's. The caller checks what it reads (``check_example_columns``); the buffer lets
    it open one reader per thread."""
    data = _mapped(reg, snap.examples)
    what = f"examples table {short(snap.examples)} of {snap.dataset!r}"
    try:
        pf = pq.ParquetFile(pa.BufferReader(data), pre_buffer=False)
    except (pa.ArrowException, OSError) as e:
        raise ManifestError(f"{what} is not readable Parquet: {e}") from e
    if pf.metadata.num_rows != snap.rows:
        raise ManifestError(
            f"{what} has {pf.metadata.num_rows} rows; its snapshot says {snap.rows}"
        )
    return data, pf


def map_examples(reg: Registry, snap: Snapshot) -> pa.Buffer:
    """A snapshot's examples object memory-mapped and re-hashed (``read_examples``' ``data``):
    its bytes as they were when hashed, however many times they are parsed."""
    return _mapped(reg, snap.examples)


def _mapped(reg: Registry, digest: str) -> pa.Buffer:
    """The object's bytes, memory-mapped (not copied into a Python object) and re-hashed
    before anyone parses them: the bytes parsed are the bytes hashed."""
    try:
        buf = pa.memory_map(str(reg.store.path(digest))).read_buffer()
    except FileNotFoundError:
        raise reg.store.not_found(digest) from None
    except OSError as e:
        raise StorageError(f"cannot read object {short(digest)}: {e}") from e
    with memoryview(buf) as view:
        reg.store.check_bytes(digest, view)
    return buf


def is_tree(snap: Snapshot) -> bool:
    """Whether the snapshot comes back as an ImageFolder tree (class folders)."""
    src = snap.source
    return src.get("kind") == "imagefolder" or src.get("layout") == "imagefolder"


def has_payloads(snap: Snapshot) -> bool:
    """Whether every row of the snapshot must name a payload object (an ImageFolder tree, or
    a table of files), as opposed to a label-only set."""
    return is_tree(snap) or bool(snap.source.get("files"))


def check_examples_against(table: pa.Table, snap: Snapshot) -> None:
    """Refuse an examples table that its snapshot manifest cannot stand for: a table stored
    under its own digest is intact, yet may still be hostile (made by other code and pushed).
    Checks the columns read: row count, types, labels within the classes, ids and (where the
    layout needs them) blobs present and well formed. Costs a few vectorised passes."""
    what = f"examples table {short(snap.examples)} of {snap.dataset!r}"
    if table.num_rows != snap.rows:
        raise ManifestError(f"{what} has {table.num_rows} rows; its snapshot says {snap.rows}")
    check_example_columns(table, snap)


def _call(name: str, *args: object, options: object = None) -> Any:
    """pyarrow's compute function ``name`` on ``args`` (with its default options, else
    ``options``), called by name: what ``pyarrow.compute``'s wrapper of it calls."""
    return call_function(name, list(args), options)


def check_example_columns(table: pa.Table | pa.RecordBatch, snap: Snapshot) -> None:
    """``check_examples_against`` but the row count, on any run of the table's rows: a
    reader that streams the table a batch at a time checks each batch with it (and the row
    count from the Parquet footer), so no batch of a hostile table is served."""
    what = f"examples table {short(snap.examples)} of {snap.dataset!r}"
    if is_tree(snap):
        unsafe = [c for c in snap.classes if not is_safe_component(c)]
        if unsafe:
            raise ManifestError(
                f"snapshot of {snap.dataset!r} names classes that are not safe folder names "
                f"(first {unsafe[0]!r}); this snapshot will not be served"
            )
    names = table.column_names
    if "label" in names:
        labels = table.column("label")
        if not pa.types.is_integer(labels.type) or labels.null_count:
            raise ManifestError(f"{what}: labels must be integers on every row")
        if len(labels):
            lo_hi = _call("min_max", labels).as_py()
            k = len(snap.classes)
            if lo_hi["min"] < 0 or lo_hi["max"] >= k:
                raise ManifestError(
                    f"{what} holds labels outside [0, {k}) (from {lo_hi['min']} to "
                    f"{lo_hi['max']}); the snapshot names {k} classes"
                )
    if "example_id" in names:
        ids = table.column("example_id")
        if not pa.types.is_string(ids.type) or ids.null_count:
            raise ManifestError(f"{what}: every row needs a string example id")
        if has_payloads(snap):
            # A checkout writes each file at its id: one that could leave the folder is
            # refused wherever the table is read, not only when it was added.
            unsafe_ids = _call(
                "match_substring_regex", ids, options=MatchSubstringOptions(UNSAFE_PATH)
            )
            if _call("any", unsafe_ids).as_py():
                bad = ids.filter(unsafe_ids)
                raise ManifestError(
                    f"{what} has {len(bad)} example ids that are not safe relative paths "
                    f"(first {bad[0].as_py()!r}): no '..', '.', empty part, leading '/', "
                    "backslash or NUL; this snapshot will not be served"
                )
    if "blob" in names:
        blobs = table.column("blob")
        if not pa.types.is_string(blobs.type):
            raise ManifestError(f"{what}: blobs must be digests (strings)")
        if has_payloads(snap) and blobs.null_count:
            raise ManifestError(
                f"{what}: {blobs.null_count} rows have no payload, but its layout needs one "
                "for every row"
            )
        digests = _call("drop_null", blobs)
        ok = _call("match_substring_regex", digests, options=MatchSubstringOptions(_DIGEST_RE))
        if len(ok) and not _call("all", ok).as_py():
            raise ManifestError(f"{what}: some blobs are not blake3 digests")


#: The columns of a corrections table the view rule reads (``rule_only``), and every column
#: ``read_corrections`` checks: a table read with these only is checked as a whole one is.
RULE_COLUMNS = ("row", "given_label", "suggested_label", "verdict", "labels", "label_counts")


def read_corrections(
    reg: Registry, overlay: Overlay, *, base: Snapshot | None = None, rule_only: bool = False
) -> pa.Table:
    """An overlay's corrections table, re-hashed before it is parsed, and checked against its
    base snapshot: rows sorted, unique and inside the snapshot, labels within its classes,
    verdicts known. (Checked against the base's example ids and labels when it is written.)

    ``rule_only``: only the ``RULE_COLUMNS`` it has are decoded (not the ids, scores and votes:
    two thirds of a votes overlay's table), with the same checks; ``len`` of a view and its
    ``iter_batches`` need no more."""
    data = _mapped(reg, overlay.corrections)
    what = f"corrections table {short(overlay.corrections)}"
    try:
        schema = pq.read_schema(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as e:
        raise ManifestError(f"{what} is not readable Parquet: {e}") from e
    version = corrections_version(schema)
    if version is None:
        raise ManifestError(f"{what} does not have the overlay schema")
    if version != overlay.version:
        raise ManifestError(
            f"{what} has the columns of corrections version {version}, but its overlay "
            f"manifest is version {overlay.version}; run 'dsreg verify'"
        )
    columns = [c for c in schema.names if c in RULE_COLUMNS] if rule_only else None
    table = read_parquet_mapped(data, digest=overlay.corrections, columns=columns)
    # The caller may hold the base already (a Dataset does): its manifest is not read again.
    if base is None:
        base = reg.snapshot(overlay.base)
    rows = table.column("row")
    if len(rows):
        lo_hi = pc.min_max(rows).as_py()
        if lo_hi["min"] < 0 or lo_hi["max"] >= base.rows:
            raise ManifestError(f"{what} names rows outside its snapshot's [0, {base.rows})")
        if len(rows) > 1:
            r = rows.combine_chunks()
            if not pc.all(pc.greater(r[1:], r[:-1])).as_py():
                raise ManifestError(f"{what}: rows are not sorted and unique")
    k = len(base.classes)
    for name in ("given_label", "suggested_label"):
        col = table.column(name).drop_null()
        if len(col):
            lo_hi = pc.min_max(col).as_py()
            if lo_hi["min"] < 0 or lo_hi["max"] >= k:
                raise ManifestError(f"{what}: {name} outside the snapshot's [0, {k})")
    if version in LABEL_SET_VERSIONS:
        flat = (
            pc.list_flatten(table.column("labels")),
            pc.struct_field(pc.list_flatten(table.column("label_counts")), "label"),
        )
        for col in flat:
            if len(col):
                lo_hi = pc.min_max(col).as_py()
                if lo_hi["min"] < 0 or lo_hi["max"] >= k:
                    raise ManifestError(f"{what}: labels outside the snapshot's [0, {k})")
    unknown = pc.invert(pc.is_in(table.column("verdict"), value_set=string_array(VERDICTS)))
    if pc.any(unknown).as_py():
        raise ManifestError(f"{what} holds verdicts dsreg does not know; known: {VERDICTS}")
    return table

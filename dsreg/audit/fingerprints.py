"""Fingerprints of payloads, stored once per payload digest and reused.

A fingerprint is a pure function of a payload's bytes (and of the method, ``METHOD``), so it is
computed once per payload digest. The fingerprints of a snapshot's payloads are one Parquet
object in the store (``FINGERPRINT_SCHEMA``, one row per distinct payload, sorted by digest),
found again through a local index, ``state/fingerprints/<method>/<snapshot hex>``, holding its
digest. Fingerprinting a snapshot first gathers the rows every indexed table already holds for
its payloads (any snapshot's: a training set that grew by 1% shares 99% of its payloads with
the one before) and computes only the rest.

The tables are objects like any other: the audit overlay names those it read in its producer
inputs (``Overlay.held``), so whatever keeps the overlay keeps them (gc, verify), and push,
pull and clone carry them with the revisions that apply it. The index is a cache: where it has
no entry for a snapshot (a clone, or ``state/`` deleted), the audit overlays the registry's
tags and log reach are read for the tables they hold, and indexed again. A table gc removed
(held by nothing any more) costs a recomputation; a table found damaged is never read, its rows
are recomputed and the good bytes replace it.

An index entry naming anything but a readable fingerprints table of this method (an object
that is gone, damaged, not Parquet, or a table of other columns) is a cache miss: the rows are
computed again and the entry is replaced. Only a table's footer is read before its columns are
known to be this method's, so an entry naming a large object costs no more than its footer.

What a payload is: bytes PIL recognises as an image, or that start with the signature of JPEG,
PNG, GIF, WebP or TIFF, are pHashed (``images.py``); anything else is read as UTF-8 text
(``text.py``), unless the caller declares the kind (a corpus file's column does: ``as_kind``).
A payload that is neither (an image the decoder refuses, with the decoder's reason; empty or
binary data) gets kind ``unreadable`` and its one-line reason: it is counted and listed by the
audit, never matched and never passed as clean.

Memory. No payload of more than ``MAX_PAYLOAD_BYTES`` is read: its size is looked at first,
and it is unreadable ("larger than 64 MiB"; an object of the store is still re-hashed, in
chunks, so damage is found). A batch of files is read and fingerprinted in groups of at most
``GROUP_BYTES`` of payloads, so a batch's memory does not grow with its files' sizes.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsreg._util.fs import write_atomic
from dsreg._util.lazy import lazy_imports
from dsreg.audit.engines import Engine, run_batches
from dsreg.audit.images import CROPS, THUMB_SIDE, fingerprint_images
from dsreg.audit.text import NUM_PERM, fingerprint_texts
from dsreg.errors import (
    CorruptObjectError,
    DsregError,
    ManifestError,
    ObjectNotFoundError,
    StorageError,
)
from dsreg.formats.manifests import HELD_INPUT, Overlay, Revision
from dsreg.formats.tables import parquet_bytes, read_parquet_bytes
from dsreg.objects.digest import short
from dsreg.objects.hashing import hash_bytes, hash_file
from dsreg.registry.folder import Registry
from dsreg.registry.reachable import roots

# Pillow (the audit extra): imported when an image is first decoded, so that the audit's types
# import without it.
with lazy_imports():
    from PIL import Image

__all__ = [
    "FILES_SCHEMA",
    "FINGERPRINT_SCHEMA",
    "GROUP_BYTES",
    "MAX_PAYLOAD_BYTES",
    "METHOD",
    "Fingerprinted",
    "fingerprint_files",
    "fingerprint_payloads",
    "fingerprints_of",
    "too_large",
    "unreadable_rows",
]

#: The method's name: a change to any fingerprint function gets a new one (a new index folder).
METHOD = "phash32-draft64rgb-crops16-thumb8rgb_minhash-a32-128-w3_gram13_v3"
#: The largest payload the audit reads (a file of an ``--against`` folder, an object of the
#: store, an item of a Parquet corpus): a larger one is unreadable, never read whole.
MAX_PAYLOAD_BYTES = 64 << 20
#: Payload bytes a batch holds at once: its files are read and fingerprinted in groups of at
#: most this many bytes (one file more, if that file alone is larger).
GROUP_BYTES = 64 << 20
# Lists as Parquet reads them back (item fields named "element"), so a read table's schema
# equals this one.
_U64_LIST = pa.list_(pa.field("element", pa.uint64()))
_U32_LIST = pa.list_(pa.field("element", pa.uint32()))
FINGERPRINT_SCHEMA = pa.schema(
    [
        pa.field("payload", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # image, text or unreadable
        pa.field("error", pa.string()),
        pa.field("phash", pa.uint64()),
        pa.field("phash_crops", _U64_LIST),  # the pHash of each crop of images.CROPS
        pa.field("thumb", pa.binary(THUMB_SIDE * THUMB_SIDE * 3)),  # RGB, row by row
        pa.field("minhash", _U32_LIST),  # NUM_PERM values
        pa.field("shingles", _U64_LIST),
        pa.field("grams", _U64_LIST),
    ]
)
# What ``fingerprint_files`` reads: each file's path and, for an object of the store, the
# digest its bytes must hash to (null for a corpus file, named by whatever it hashes to).
FILES_SCHEMA = pa.schema(
    [pa.field("path", pa.string(), nullable=False), pa.field("expect", pa.string())]
)
# What it returns: per file, its path, why it could not be read (null if it was), then its
# fingerprints (null for a file not read).
_READ_SCHEMA = pa.schema(
    [pa.field("path", pa.string(), nullable=False), pa.field("read_error", pa.string())]
    + [f.with_nullable(True) for f in FINGERPRINT_SCHEMA]
)


# Why bytes given as an image (``as_kind``) are unreadable where PIL recognises no format.
_NOT_AN_IMAGE = "not an image (PIL recognises no image format in these bytes)"
# Signatures of image formats: bytes starting with one are an image even where PIL cannot open
# them (damaged markers), so they get the decoder's reason, never "not UTF-8 text".
_IMAGE_SIGNATURES = (
    b"\xff\xd8\xff",  # JPEG
    b"\x89PNG\r\n\x1a\n",
    b"GIF87a",
    b"GIF89a",
    b"II*\x00",  # TIFF, little-endian
    b"MM\x00*",  # TIFF, big-endian
)


def _is_image(payload: bytes) -> bool:
    if payload.startswith(_IMAGE_SIGNATURES) or (
        payload[:4] == b"RIFF" and payload[8:12] == b"WEBP"
    ):
        return True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(payload)):
                return True
        except Image.DecompressionBombError:  # an image, too large to decode: said so later
            return True
        except Exception:  # PIL raises many types for bytes it does not know
            return False


def too_large(size: int) -> str:
    """Why a payload of ``size`` bytes is not read."""
    return (
        f"larger than {MAX_PAYLOAD_BYTES >> 20} MiB ({size:,} bytes): the audit reads no "
        "payload over that"
    )


def _u64_lists(values: Sequence[np.ndarray], valid: np.ndarray) -> pa.Array:
    sizes = np.array([len(v) if ok else 0 for v, ok in zip(values, valid, strict=True)])
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(sizes, out=offsets[1:])
    kept = [v for v, ok in zip(values, valid, strict=True) if ok]
    flat = np.concatenate(kept) if kept else np.zeros(0, dtype=np.uint64)
    mask = pa.array(~valid) if not valid.all() else None
    lists = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, pa.uint64()), mask=mask)
    return lists.cast(_U64_LIST)


def fingerprint_payloads(
    digests: Sequence[str], payloads: Sequence[bytes], *, as_kind: str | None = None
) -> pa.Table:
    """The fingerprints table of ``payloads`` (named by ``digests``), in their order: the pure
    batch function that a worker process or Ray Data's ``map_batches`` runs.

    ``as_kind`` (``image`` or ``text``) takes every payload as that kind, as a corpus file's
    column declares it, instead of recognising it: an image payload PIL does not recognise is
    unreadable (never read as text), and a text is never taken for an image."""
    n = len(payloads)
    known = np.array([as_kind != "text" and _is_image(p) for p in payloads], dtype=bool)
    image = known if as_kind is None else np.full(n, as_kind == "image")
    kind = np.where(image, "image", "text").astype(object)
    error: list[str | None] = [
        _NOT_AN_IMAGE if i and not k else None for k, i in zip(known, image, strict=True)
    ]
    phash = np.zeros(n, dtype=np.uint64)
    idx_i, idx_t = np.flatnonzero(image & known), np.flatnonzero(~image)
    img = fingerprint_images([payloads[int(i)] for i in idx_i])
    phash[idx_i] = img.hashes
    crops = np.zeros((n, len(CROPS)), dtype=np.uint64)
    crops[idx_i] = img.crops
    txt = fingerprint_texts([payloads[int(i)] for i in idx_t])
    minhash = np.zeros((n, NUM_PERM), dtype=np.uint32)
    minhash[idx_t] = txt.minhash
    shingles: list[np.ndarray] = [np.zeros(0, dtype=np.uint64)] * n
    grams = list(shingles)
    for j, i in enumerate(idx_t):
        shingles[i], grams[i] = txt.shingles[j], txt.grams[j]
    ok = np.zeros(n, dtype=bool)
    ok[idx_i], ok[idx_t] = img.ok, txt.ok
    for pos, errs in ((idx_i, img.errors), (idx_t, txt.errors)):
        for j, i in enumerate(pos):
            error[i] = errs[j] or None
    kind[~ok] = "unreadable"
    is_img, is_txt = image & ok, ~image & ok
    thumbs: list[bytes | None] = [None] * n
    for j, i in enumerate(idx_i):
        if is_img[i]:
            thumbs[i] = img.thumbs[j].tobytes()
    flat = pa.array(minhash.ravel(), pa.uint32())
    return pa.Table.from_arrays(
        [
            pa.array(list(digests), pa.string()),
            pa.array(kind.tolist(), pa.string()),
            pa.array(error, pa.string()),
            pa.array(phash, pa.uint64(), mask=~is_img),
            _u64_lists(list(crops), is_img),
            pa.array(thumbs, FINGERPRINT_SCHEMA.field("thumb").type),
            pa.FixedSizeListArray.from_arrays(flat, NUM_PERM, mask=pa.array(~is_txt)).cast(
                _U32_LIST
            ),
            _u64_lists(shingles, is_txt),
            _u64_lists(grams, is_txt),
        ],
        schema=FINGERPRINT_SCHEMA,
    )


class _Read(NamedTuple):
    """A file as ``fingerprint_files`` read it: its bytes, or why it has none."""

    data: bytes = b""
    error: str | None = None  # why it could not be read: no fingerprints row
    over: str | None = None  # an object of the store too large to read: an unreadable row


def _read(path: str, expect: str | None) -> _Read:
    """A file's bytes, or why they cannot be fingerprinted: not a regular file (a FIFO or a
    device would block or never end), unreadable, not the bytes ``expect`` names, or more
    than ``MAX_PAYLOAD_BYTES`` (its size looked at first: it is never read whole)."""
    try:
        # Looked at before it is opened: opening a FIFO would wait for a writer.
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            return _Read(error="not a regular file")
        data = b""
        if info.st_size <= MAX_PAYLOAD_BYTES:
            with open(path, "rb") as f:
                data = f.read(MAX_PAYLOAD_BYTES + 1)  # one more: a file that grew is seen
        size = max(info.st_size, len(data))
        if size > MAX_PAYLOAD_BYTES:
            if expect is None:
                return _Read(error=too_large(size))
            if hash_file(path) != expect:  # in chunks: damage is found, in bounded memory
                return _Read(error=_DAMAGED)
            return _Read(over=too_large(size))
    except OSError as e:
        return _Read(error=f"cannot be read ({e.strerror or type(e).__name__})")
    if expect is not None and hash_bytes(data) != expect:
        return _Read(error=_DAMAGED)
    return _Read(data)


_DAMAGED = "damaged: its bytes do not hash to its digest"


def unreadable_rows(digests: Sequence[str], reasons: Sequence[str]) -> pa.Table:
    """Fingerprints rows of kind ``unreadable`` for payloads not read, with the reason."""
    n = len(digests)
    columns = [pa.array(list(digests), pa.string()), pa.array(["unreadable"] * n, pa.string())]
    columns.append(pa.array(list(reasons), pa.string()))
    columns += [pa.nulls(n, f.type) for f in FINGERPRINT_SCHEMA][3:]
    return pa.Table.from_arrays(columns, schema=FINGERPRINT_SCHEMA)


class _Groups:
    """The payloads of a batch, fingerprinted in groups of at most ``GROUP_BYTES``: the rows
    made so far, and the row of each file (-1 for none)."""

    def __init__(self, n: int) -> None:
        self.parts: list[pa.Table] = []
        self.at = np.full(n, -1, dtype=np.int64)
        self.rows = 0
        self.held: list[tuple[int, str, bytes]] = []
        self.size = 0

    def add(self, i: int, digest: str, data: bytes) -> None:
        self.held.append((i, digest, data))
        self.size += len(data)
        if self.size >= GROUP_BYTES:
            self.flush()

    def add_rows(self, files: list[int], table: pa.Table) -> None:
        self.parts.append(table)
        self.at[files] = self.rows + np.arange(len(files))
        self.rows += len(files)

    def flush(self) -> None:
        if self.held:
            made = fingerprint_payloads([d for _, d, _ in self.held], [b for *_, b in self.held])
            self.add_rows([i for i, _, _ in self.held], made)
        self.held, self.size = [], 0


def fingerprint_files(batch: pa.Table) -> pa.Table:
    """The fingerprints of the files a ``FILES_SCHEMA`` batch names, one row per file in the
    batch's order, each named by the digest of the bytes read: the pure batch function every
    engine runs (``engines.py``), here in a worker process or on a Ray cluster's node. A file
    that cannot be read, or an object whose bytes are not those of its digest, gets its reason
    in ``read_error`` and no fingerprints. The files are read and fingerprinted in groups of
    at most ``GROUP_BYTES``, each file once."""
    paths = batch.column("path").to_pylist()
    groups = _Groups(len(paths))
    errors: list[str | None] = [None] * len(paths)
    for i, (path, expect) in enumerate(zip(paths, batch.column("expect").to_pylist(), strict=True)):
        got = _read(path, expect)
        if got.error is not None:
            errors[i] = got.error
        elif got.over is not None and expect is not None:
            groups.add_rows([i], unreadable_rows([expect], [got.over]))
        else:
            groups.add(i, expect or hash_bytes(got.data), got.data)
    groups.flush()
    fp = pa.concat_tables(groups.parts) if groups.parts else FINGERPRINT_SCHEMA.empty_table()
    take = pa.array(groups.at, mask=groups.at < 0)
    columns = [fp.column(f.name).take(take) for f in FINGERPRINT_SCHEMA]
    return pa.Table.from_arrays(
        [pa.array(paths, pa.string()), pa.array(errors, pa.string()), *columns],
        schema=_READ_SCHEMA,
    )


class Listing(NamedTuple):
    """The files of a corpus folder that is not registered, listed before any work."""

    folder: Path
    files: list[str]  # paths below ``folder``, in walk order, names starting with '.' skipped
    unreadable: list[tuple[str, str]]  # (path, reason) of what the walk could not open


def list_folder(folder: Path) -> Listing:
    """Every file below ``folder`` (names starting with ``.`` skipped, as an add skips them),
    and the folders the walk could not open, with the reason."""
    files: list[str] = []
    bad: list[tuple[str, str]] = []
    for top, dirs, names in os.walk(
        folder, onerror=lambda e: bad.append((str(e.filename), _why_unreadable(e)))
    ):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(f for f in names if not f.startswith(".")):
            files.append((Path(top) / name).relative_to(folder).as_posix())
    return Listing(folder, files, bad)


def _why_unreadable(e: OSError) -> str:
    return f"cannot be read ({e.strerror or type(e).__name__})"


class Fingerprinted:
    """A snapshot's fingerprints: the table (one row per distinct payload), its digest, and how
    many rows were computed now rather than found stored."""

    __slots__ = ("computed", "digest", "table")

    def __init__(self, table: pa.Table, digest: str, computed: int) -> None:
        self.table = table
        self.digest = digest
        self.computed = computed


def _index_dir(reg: Registry) -> Path:
    return reg.root / "state" / "fingerprints" / METHOD


def _read_table(reg: Registry, digest: str) -> pa.Table | None:
    """A stored fingerprints table, verified; None (a cache miss: recomputed) if it is gone,
    damaged, or not a fingerprints table of this method. Its footer is read first, so an
    object that is not one is never read whole."""
    try:
        schema = pq.read_schema(reg.store.path(digest))
    except (OSError, pa.ArrowException):
        return None
    if not schema.remove_metadata().equals(FINGERPRINT_SCHEMA):
        return None
    try:
        data = reg.store.read_bytes(digest)
        table = read_parquet_bytes(data, digest=digest)
    except (ObjectNotFoundError, CorruptObjectError, ManifestError, StorageError):
        return None
    return table if table.schema.equals(FINGERPRINT_SCHEMA) else None


def _indexed(reg: Registry, snapshot: str) -> tuple[str | None, list[str]]:
    """The digest indexed for ``snapshot`` (None if none) and every indexed digest. An entry
    naming a table the store no longer has (gc removed it once nothing held it) is dropped."""
    folder = _index_dir(reg)
    own, every = None, []
    with contextlib.suppress(FileNotFoundError):
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            with contextlib.suppress(OSError, UnicodeDecodeError, DsregError, ValueError):
                text = Path(entry.path).read_text("ascii").strip()
                if not reg.store.has(text):
                    _drop(Path(entry.path), text)
                    continue
                every.append(text)
                if entry.name == snapshot.removeprefix("blake3:"):
                    own = text
    return own, every


def _drop(path: Path, digest: str) -> None:
    """Remove the index entry ``path`` if it still names ``digest`` (an audit may have indexed
    a new table there meanwhile, which stays)."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if path.read_text("ascii").strip() == digest:
            path.unlink()


def _known_rows(reg: Registry, wanted: pa.Array, digests: list[str]) -> pa.Table:
    """The rows of the indexed tables for the payloads in ``wanted``, each once."""
    parts = []
    missing = wanted
    for digest in digests:
        if not len(missing):
            break
        table = _read_table(reg, digest)
        if table is None:
            continue
        hit = table.filter(pc.is_in(table.column("payload"), value_set=missing))
        if hit.num_rows:
            parts.append(hit)
            missing = pc.filter(missing, pc.invert(pc.is_in(missing, value_set=hit["payload"])))
    return pa.concat_tables(parts) if parts else FINGERPRINT_SCHEMA.empty_table()


def fingerprints_of(
    reg: Registry,
    snapshot: str,
    payloads: pa.Array,
    *,
    engine: Engine | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Fingerprinted:
    """The fingerprints of the distinct ``payloads`` (digests) of ``snapshot``: the stored table
    if indexed, else the rows stored for any snapshot plus the missing ones computed (on
    ``engine``: by default worker processes here), stored as one object and indexed.
    ``progress(done, total)`` hears of the payloads fingerprinted now, of those that were not
    stored."""
    wanted = pc.unique(payloads.drop_null()) if len(payloads) else pa.array([], pa.string())
    wanted = wanted.cast(pa.string())
    own, every = _indexed(reg, snapshot)
    if own is None and _index_held(reg, every):
        own, every = _indexed(reg, snapshot)
    if own is not None:
        table = _read_table(reg, own)
        if table is not None and pc.all(pc.is_in(wanted, value_set=table["payload"])).as_py():
            return Fingerprinted(table, own, 0)
    known = _known_rows(reg, wanted, every)
    todo = pc.filter(wanted, pc.invert(pc.is_in(wanted, value_set=known["payload"])))
    fresh = _compute(reg, todo.to_pylist(), engine or Engine(), progress)
    table = pa.concat_tables([known, fresh]).sort_by("payload")
    return Fingerprinted(table, _stored(reg, snapshot, table), fresh.num_rows)


def _stored(reg: Registry, snapshot: str, table: pa.Table) -> str:
    """Store ``table`` and index it for ``snapshot``, as a writer (gc waits meanwhile); the same
    bytes found damaged in the store (marked when read) are replaced by these."""
    data = parquet_bytes(table)
    with reg.lock():
        digest = reg.store.put_bytes(data)
        if digest in reg.store.marked_corrupt():
            reg.store.replace_corrupt(digest, data)
        _index(reg, snapshot, digest)
    return digest


def _index(reg: Registry, snapshot: str, digest: str) -> None:
    try:
        path = _index_dir(reg) / snapshot.removeprefix("blake3:")
        write_atomic(path, digest.encode() + b"\n")
    except OSError as e:
        raise StorageError(f"cannot index the fingerprints of {short(snapshot)}: {e}") from e


def _index_held(reg: Registry, indexed: list[str]) -> int:
    """Index the fingerprints tables that the audit overlays reached from the registry's tags
    and log hold, and that the index does not name yet (a clone's, or after ``state/`` was
    deleted); how many were indexed. The audited set's table is the overlay base's; an
    ``against<k>_fingerprints`` table is the snapshot of revision ``against<k>``, where that
    revision is here."""
    known = set(indexed)
    found: dict[str, str] = {}
    for ov in _audit_overlays(reg):
        if ov.producer.get("params", {}).get("method") != METHOD:
            continue  # another method's tables: another schema, never read as this one's
        inputs = ov.producer.get("inputs", {})
        pairs = [(ov.base, inputs.get(HELD_INPUT))]
        for name, digest in inputs.items():
            source = name.removesuffix(f"_{HELD_INPUT}")
            if source != name and inputs.get(source) and reg.store.has(inputs[source]):
                with contextlib.suppress(DsregError):
                    pairs.append((reg.revision(inputs[source]).snapshot, digest))
        for snapshot, digest in pairs:
            if digest and digest not in known and reg.store.has(digest):
                found.setdefault(snapshot, digest)
    for snapshot, digest in found.items():
        _index(reg, snapshot, digest)
    return len(found)


def _audit_overlays(reg: Registry) -> list[Overlay]:
    """The overlays holding fingerprints that the tags and the log reach (directly, or by a
    revision applying them); one that cannot be read is left out (verify names it)."""
    digests: dict[str, None] = {}
    for start in roots(reg):
        with contextlib.suppress(DsregError):
            m = reg.manifest(start)
            if isinstance(m, Revision):
                digests.update(dict.fromkeys(m.overlays))
            elif isinstance(m, Overlay):
                digests[start] = None
    out = []
    for d in digests:
        with contextlib.suppress(DsregError):
            ov = reg.overlay(d)
            if ov.held:
                out.append(ov)
    return out


def _compute(
    reg: Registry,
    digests: list[str],
    engine: Engine,
    progress: Callable[[int, int], None] | None,
) -> pa.Table:
    """Fingerprint the stored payloads ``digests`` on ``engine``, each re-hashed as it is read:
    a damaged object is refused (and marked), never fingerprinted."""
    inputs = pa.table(
        {"path": [os.fspath(reg.store.path(d)) for d in digests], "expect": digests},
        schema=FILES_SCHEMA,
    )
    table = files_table(run_batches(fingerprint_files, inputs, engine, progress))
    failed = pc.is_valid(table.column("read_error"))
    for path, why in zip(
        table.column("path").filter(failed).to_pylist(),
        table.column("read_error").filter(failed).to_pylist(),
        strict=True,
    ):
        digest = digests[inputs.column("path").to_pylist().index(path)]
        reg.store.read_bytes(digest)  # raises the store's own error: absent, damaged, unreadable
        raise StorageError(f"cannot fingerprint object {short(digest)}: {why}")
    return fingerprints_only(table)


def files_table(parts: list[pa.Table]) -> pa.Table:
    """The batches ``fingerprint_files`` returned, as one table."""
    return pa.concat_tables(parts) if parts else _READ_SCHEMA.empty_table()


def fingerprints_only(table: pa.Table) -> pa.Table:
    """The rows of a ``files_table`` that were read, as a ``FINGERPRINT_SCHEMA`` table."""
    read = table.filter(pc.is_null(table.column("read_error")))
    return read.select(FINGERPRINT_SCHEMA.names).cast(FINGERPRINT_SCHEMA)

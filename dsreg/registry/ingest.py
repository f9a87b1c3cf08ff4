"""``dsreg add``: a source becomes payload objects, an examples table, a snapshot, a tag.

Order of writes: payloads, then the examples table, then manifests, then the ref; a reader that
sees the ref sees everything it reaches. Checks that can refuse the input run before any write.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from dsreg.errors import StorageError
from dsreg.registry import treescan
from dsreg.registry.addtree import AddResult, refuse_tag
from dsreg.registry.batch import ObjectBatch, hash_files
from dsreg.registry.digest import hash_bytes
from dsreg.registry.examples import base_schema, check_examples, parquet_bytes
from dsreg.registry.manifests import Revision, Snapshot
from dsreg.registry.names import check_name
from dsreg.registry.progress import ProgressHook, no_progress
from dsreg.registry.registry import Registry
from dsreg.registry.sources import Payload, Source

__all__ = ["AddResult", "add_source"]


def add_source(
    reg: Registry,
    dataset: str,
    source: Source,
    *,
    tag: str | None,
    force: bool = False,
    progress: ProgressHook = no_progress,
    command: str = "",
    extra_provenance: dict[str, object] | None = None,
) -> AddResult:
    """Store ``source`` as a snapshot of ``dataset``; point ``dataset@tag`` at its original view."""
    check_name(dataset, what="dataset name")
    if tag is not None:
        check_name(tag, what="tag name")
    with reg.lock():
        return add_locked(
            reg,
            dataset,
            source,
            tag=tag,
            force=force,
            progress=progress,
            command=command,
            extra_provenance=extra_provenance,
        )


def add_locked(
    reg: Registry,
    dataset: str,
    source: Source,
    *,
    tag: str | None,
    force: bool = False,
    progress: ProgressHook = no_progress,
    command: str = "",
    extra_provenance: dict[str, object] | None = None,
) -> AddResult:
    """``add_source`` for a caller that holds ``reg.lock()`` and has checked the names."""
    existing = reg.refs.get(dataset, tag) if tag is not None else None
    # An existing tag may still be re-added to the same content (a no-op), so hash first and
    # write nothing until we know the add will be accepted.
    dry = existing is not None and not force
    digests, new = _store_payloads(reg, source.payloads, write=not dry, progress=progress)
    table = _examples_table(source, digests)
    check_examples(table, classes=source.classes)
    data = parquet_bytes(table)
    examples = hash_bytes(data)
    provenance = dict(source.provenance)
    if extra_provenance:
        provenance.update(extra_provenance)
    snap = Snapshot(
        dataset=dataset,
        examples=examples,
        rows=len(source.ids),
        classes=source.classes,
        source=provenance,
    )
    snap_digest = reg.digest_of(snap)
    rev = Revision(snapshot=snap_digest)
    if dry and existing != rev.digest:
        assert existing is not None and tag is not None
        refuse_tag(dataset, tag, existing, rev.digest)
    if dry:
        new = _store_missing(reg, source.payloads, digests)
    reg.store.put_bytes(data)
    reg.put_manifest(snap)
    rev_digest = reg.put_manifest(rev)
    previous = None
    if tag is not None:
        previous = reg.refs.set(dataset, tag, rev_digest, force=force, command=command)
    total = sum(p.size for p in source.payloads if p is not None)
    return AddResult(
        dataset=dataset,
        tag=tag,
        revision=rev_digest,
        snapshot=snap_digest,
        examples=examples,
        rows=len(source.ids),
        classes=source.classes,
        files=sum(p is not None for p in source.payloads),
        new_objects=new,
        bytes=total,
        previous=previous,
    )


def _examples_table(source: Source, digests: Sequence[str | None]) -> pa.Table:
    sizes = [p.size if p is not None else None for p in source.payloads]
    cols = [
        _string_array(source.ids),
        pa.Array.from_buffers(
            pa.int32(), len(source.labels), [None, pa.py_buffer(_int32(source.labels))]
        ),
        _string_array(digests),
        _int64_array(sizes),
    ]
    table = pa.Table.from_arrays(cols, schema=base_schema())
    if source.metadata is not None:
        for name, col in zip(source.metadata.column_names, source.metadata.columns, strict=True):
            table = table.append_column(name, col)
    return table


# Arrow arrays straight from buffers: ``pa.array`` on a Python list imports pandas (when it is
# installed) to ask whether the list is a pandas object, which costs more than the whole table.
def _validity(values: Sequence[object]) -> pa.Buffer | None:
    if all(v is not None for v in values):
        return None
    mask = np.fromiter((v is not None for v in values), dtype=np.bool_, count=len(values))
    return pa.py_buffer(np.packbits(mask, bitorder="little"))


def _string_array(values: Sequence[str | None]) -> pa.Array:
    encoded = [b"" if v is None else v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    buffers = [_validity(values), pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    # Built as large_string (64-bit offsets, any size), stored as the schema's string.
    return pa.Array.from_buffers(pa.large_string(), len(encoded), buffers).cast(pa.string())


def _int32(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int32)


def _int64_array(values: Sequence[int | None]) -> pa.Array:
    data = np.fromiter((0 if v is None else v for v in values), dtype=np.int64, count=len(values))
    return pa.Array.from_buffers(pa.int64(), len(values), [_validity(values), pa.py_buffer(data)])


def _common_prefix(keys: list[str]) -> str:
    # The common prefix of a set of strings is that of its least and greatest members.
    lo, hi = min(keys), max(keys)
    n = 0
    for a, b in zip(lo, hi, strict=False):
        if a != b:
            break
        n += 1
    return lo[:n]


def _paths(payloads: Sequence[Payload | None]) -> tuple[list[int], list[str]]:
    """The rows that have a payload, and their absolute paths as strings (the stat cache's keys,
    and cheaper to open than ``Path`` objects)."""
    rows = [i for i, p in enumerate(payloads) if p is not None]
    cwd = os.getcwd()
    base = cwd if cwd.endswith("/") else cwd + "/"
    paths = [os.fspath(payloads[i].path) for i in rows]  # type: ignore[union-attr]
    # What os.path.join(cwd, p) gives, without its cost per file.
    return rows, [p if p.startswith("/") else base + p for p in paths]


def _store_payloads(
    reg: Registry,
    payloads: Sequence[Payload | None],
    *,
    write: bool,
    progress: ProgressHook,
) -> tuple[list[str | None], int]:
    """Hash (and with ``write``, store) every payload; return the digests and how many objects
    were new. Unchanged files (same path, inode, size, mtime as in the stat cache) are not read;
    the rest are read once each, in parallel across files, one thread per file."""
    out: list[str | None] = [None] * len(payloads)
    rows, keys = _paths(payloads)
    if not rows:
        return out, 0
    # Files changed this close to now may change again without their stat changing: their
    # digests are used but not remembered (see treescan.RACY_NS).
    trust_before = time.time_ns() - treescan.RACY_NS
    cache = reg.state.lookup(_common_prefix(keys))
    todo: list[int] = []
    for j, i in enumerate(rows):
        p = payloads[i]
        assert p is not None
        hit = cache.get(keys[j])
        if hit is not None and hit[:4] == (p.inode, p.size, p.mtime_ns, p.ctime_ns):
            out[i] = hit[4]
        else:
            todo.append(j)
    del cache
    if write:
        # A cached digest says what the file holds, not that the store still has it (gc, or a
        # damaged registry being repaired by adding again): those files are read and stored.
        gone = reg.store.missing({d for d in out if d is not None})
        if gone:
            todo = sorted({*todo, *(j for j, i in enumerate(rows) if out[i] in gone)})
    new = 0
    fresh: list[tuple[str, int, int, int, int, str]] = []
    if todo:
        sizes = [payloads[rows[j]].size for j in todo]  # type: ignore[union-attr]
        with reg.store.batch() if write else contextlib.nullcontext() as batch:
            got, new = _read_files(
                [keys[j] for j in todo], sizes, batch, progress, "adding" if write else "hashing"
            )
        for j, digest in zip(todo, got, strict=True):
            i = rows[j]
            out[i] = digest
            p = payloads[i]
            assert p is not None
            if p.mtime_ns < trust_before and p.ctime_ns < trust_before:
                fresh.append((keys[j], p.inode, p.size, p.mtime_ns, p.ctime_ns, digest))
    reg.state.store(fresh)
    return out, new


def _store_missing(
    reg: Registry, payloads: Sequence[Payload | None], digests: Sequence[str | None]
) -> int:
    """Store the payloads whose objects are absent, after a pass that only hashed them; refuse
    if a file no longer holds the bytes that were hashed."""
    gone = reg.store.missing({d for d in digests if d is not None})
    if not gone:
        return 0
    rows, keys = _paths(payloads)
    todo = [j for j, i in enumerate(rows) if digests[i] in gone]
    sizes = [payloads[rows[j]].size for j in todo]  # type: ignore[union-attr]
    with reg.store.batch() as batch:
        got, new = _read_files([keys[j] for j in todo], sizes, batch, no_progress, "adding")
        for j, digest in zip(todo, got, strict=True):
            if digest != digests[rows[j]]:
                raise StorageError(
                    f"{keys[j]} changed while it was being added; nothing was tagged: add again"
                )
    return new


def _read_files(
    paths: list[str],
    sizes: list[int],
    batch: ObjectBatch | None,
    progress: ProgressHook,
    task: str,
) -> tuple[list[str], int]:
    """Each file's digest (read in parallel: worker processes for many files, else threads);
    with ``batch``, its bytes are staged and installed too. Returns the digests and how many
    objects were new."""

    def report(done: int) -> None:
        progress(task, done, len(paths))

    if batch is None:
        return hash_files(paths, sizes, report), 0
    out, _read = batch.put_files(paths, sizes, report)
    return out, batch.commit()

"""``dsreg add``: a source becomes payload objects, an examples table, a snapshot, a tag.

Order of writes: payloads, then the examples table, then manifests, then the ref; a reader that
sees the ref sees everything it reaches. Checks that can refuse the input run before any write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dsreg._util.progress import ProgressHook, no_progress
from dsreg.formats.manifests import Revision, Snapshot
from dsreg.formats.tables import base_schema, check_examples, parquet_bytes
from dsreg.ingest.payloads import StoredPayloads, store_missing, store_payloads
from dsreg.ingest.result import AddResult, AddTarget, check_names, is_dry, refuse_moved_tag, set_tag
from dsreg.ingest.sources import Source
from dsreg.objects.hashing import hash_bytes
from dsreg.registry.folder import Registry

__all__ = ["AddResult", "Tagged", "add_locked", "add_source", "tag_snapshot"]


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
    target = AddTarget(
        dataset=dataset, tag=tag, force=force, command=command, extra_provenance=extra_provenance
    )
    check_names(dataset, tag)
    with reg.lock():
        return add_locked(reg, target, source, progress=progress)


@dataclass(frozen=True, slots=True)
class Tagged:
    """The manifests an add stored and the tag's previous revision (``None``: a new tag)."""

    snapshot: str
    revision: str
    previous: str | None

    def result(
        self, target: AddTarget, snap: Snapshot, *, files: int, new_objects: int, size: int
    ) -> AddResult:
        """What the add returns: ``snap`` as stored and tagged, with ``files`` payload files
        of ``size`` bytes in all, ``new_objects`` of them new to the store."""
        return AddResult(
            dataset=target.dataset,
            tag=target.tag,
            revision=self.revision,
            snapshot=self.snapshot,
            examples=snap.examples,
            rows=snap.rows,
            classes=snap.classes,
            files=files,
            new_objects=new_objects,
            bytes=size,
            previous=self.previous,
        )


def tag_snapshot(reg: Registry, target: AddTarget, snap: Snapshot) -> Tagged:
    """Store ``snap`` and its original view's revision, then point the tag at it: the ref last,
    so a reader that sees the ref sees everything it reaches."""
    snapshot = reg.put_manifest(snap)
    revision = reg.put_manifest(Revision(snapshot=snapshot))
    return Tagged(snapshot, revision, set_tag(reg, target, revision))


def add_locked(
    reg: Registry,
    target: AddTarget,
    source: Source,
    *,
    progress: ProgressHook = no_progress,
    stored: StoredPayloads | None = None,
) -> AddResult:
    """``add_source`` for a caller that holds ``reg.lock()`` and has checked the names; with
    ``stored``, what ``store_payloads(..., write=not is_dry(...))`` returned for its payloads."""
    existing = target.existing(reg)
    dry = is_dry(existing, target.force)
    if stored is None:
        stored = store_payloads(reg, source.payloads, write=not dry, progress=progress)
    digests, new = stored
    table = _examples_table(source, digests)
    check_examples(table, classes=source.classes)
    data = parquet_bytes(table)
    snap = Snapshot(
        dataset=target.dataset,
        examples=hash_bytes(data),
        rows=len(source.ids),
        classes=source.classes,
        task=source.task,
        source=target.provenance(source.provenance),
        normalization=source.normalization,
    )
    refuse_moved_tag(target, existing, Revision(snapshot=reg.digest_of(snap)).digest)
    if dry:
        new = store_missing(reg, source.payloads, digests)
    reg.store.put_bytes(data)
    return tag_snapshot(reg, target, snap).result(
        target,
        snap,
        files=sum(p is not None for p in source.payloads),
        new_objects=new,
        size=sum(p.size for p in source.payloads if p is not None),
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

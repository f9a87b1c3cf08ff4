"""``dsreg add``: a source becomes payload objects, an examples table, a snapshot, a tag.

Order of writes: payloads, then the examples table, then manifests, then the ref; a reader that
sees the ref sees everything it reaches. Checks that can refuse the input run before any write.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa

from dsreg.errors import StorageError, TagExistsError
from dsreg.registry.digest import hash_bytes, hash_file, short
from dsreg.registry.examples import base_schema, check_examples, parquet_bytes
from dsreg.registry.manifests import Revision, Snapshot
from dsreg.registry.names import check_name
from dsreg.registry.progress import ProgressHook, no_progress
from dsreg.registry.registry import Registry
from dsreg.registry.sources import Payload, Source

__all__ = ["AddResult", "add_source"]

_JOBS = max(4, min(32, (os.cpu_count() or 1) * 4))


@dataclass(frozen=True, slots=True, kw_only=True)
class AddResult:
    dataset: str
    tag: str | None
    revision: str
    snapshot: str
    examples: str
    rows: int
    classes: tuple[str, ...]
    files: int
    new_objects: int
    bytes: int
    previous: str | None

    def to_dict(self) -> dict[str, object]:
        return {
            "dataset": self.dataset,
            "tag": self.tag,
            "revision": self.revision,
            "snapshot": self.snapshot,
            "examples": self.examples,
            "rows": self.rows,
            "classes": list(self.classes),
            "files": self.files,
            "new_objects": self.new_objects,
            "bytes": self.bytes,
        }


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
    existing = reg.refs.get(dataset, tag) if tag is not None else None
    with reg.lock():
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
            raise TagExistsError(
                f"tag {dataset}@{tag} exists at {short(existing)}, and this content is "
                f"{short(rev.digest)}; tags are immutable: choose another --tag, or move it "
                "with --force (the log keeps the old value)"
            )
        if dry:
            digests, new = _store_payloads(reg, source.payloads, write=True, progress=no_progress)
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
        pa.array(source.ids, pa.string()),
        pa.array(source.labels, pa.int32()),
        pa.array(digests, pa.string()),
        pa.array(sizes, pa.int64()),
    ]
    table = pa.Table.from_arrays(cols, schema=base_schema())
    if source.metadata is not None:
        for name, col in zip(source.metadata.column_names, source.metadata.columns, strict=True):
            table = table.append_column(name, col)
    return table


def _store_payloads(
    reg: Registry,
    payloads: Sequence[Payload | None],
    *,
    write: bool,
    progress: ProgressHook,
) -> tuple[list[str | None], int]:
    """Hash (and with ``write``, store) every payload, in parallel, one thread per file."""
    todo = [(i, p) for i, p in enumerate(payloads) if p is not None]
    out: list[str | None] = [None] * len(payloads)
    if not todo:
        return out, 0
    keys = {i: str(p.path.absolute()) for i, p in todo}
    common = os.path.commonpath(list(keys.values()))
    cache = reg.state.lookup(common)
    fresh: list[tuple[str, int, int, int, str]] = []
    new = 0
    store = reg.store

    def one(item: tuple[int, Payload]) -> tuple[int, str, bool]:
        i, p = item
        hit = cache.get(keys[i])
        known = hit[3] if hit and hit[:3] == (p.inode, p.size, p.mtime_ns) else None
        if not write:
            return i, known or _hash(p), known is None
        had = known is not None and store.has(known)
        digest = store.put_file(p.path, known=known)
        return i, digest, not had

    hook: Callable[[int], None] = lambda done: progress(  # noqa: E731
        "hashing" if not write else "adding", done, len(todo)
    )
    done = 0
    try:
        with ThreadPoolExecutor(max_workers=_JOBS) as pool:
            for i, digest, was_new in pool.map(one, todo, chunksize=64):
                out[i] = digest
                p = payloads[i]
                assert p is not None
                if was_new:
                    fresh.append((keys[i], p.inode, p.size, p.mtime_ns, digest))
                    new += write
                done += 1
                if done % 256 == 0 or done == len(todo):
                    hook(done)
    except OSError as e:
        raise StorageError(f"cannot read {getattr(e, 'filename', '')}: {e.strerror}") from e
    reg.state.store(fresh)
    return out, new


def _hash(p: Payload) -> str:
    return hash_file(p.path)

"""``dsreg add`` of an ImageFolder tree, with the fast path for a tree added before.

A re-add of an unchanged tree is answered from the scan alone: the scan's fingerprint
(``TreeScan.fingerprint``) names the revision the last add of the same tree made, so nothing is
read, hashed, built or written, and numpy, pyarrow and the JSON Schema validator are not even
imported. Anything else (a new tree, a changed file, a fingerprint the state does not hold, or
one forgotten since by ``gc`` or ``verify``) goes the whole way through ``ingest``.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsreg.errors import TagExistsError
from dsreg.registry.digest import short
from dsreg.registry.names import check_name
from dsreg.registry.progress import ProgressHook, no_progress
from dsreg.registry.registry import Registry
from dsreg.registry.treescan import TreeScan

__all__ = ["AddResult", "add_tree", "check_names", "is_dry", "refuse_tag"]


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


def check_names(dataset: str, tag: str | None) -> None:
    check_name(dataset, what="dataset name")
    if tag is not None:
        check_name(tag, what="tag name")


def is_dry(existing: str | None, force: bool) -> bool:
    """An existing tag may still be re-added to the same content (a no-op), so payloads are
    hashed first and nothing is written until the add is known to be accepted."""
    return existing is not None and not force


def refuse_tag(dataset: str, tag: str, existing: str, new: str) -> None:
    raise TagExistsError(
        f"tag {dataset}@{tag} exists at {short(existing)}, and this content is "
        f"{short(new)}; tags are immutable: choose another --tag, or move it "
        "with --force (the log keeps the old value)"
    )


def add_tree(
    reg: Registry,
    dataset: str,
    scan: TreeScan,
    *,
    tag: str | None,
    force: bool = False,
    progress: ProgressHook = no_progress,
    command: str = "",
) -> AddResult:
    """Store the tree ``scan`` describes as a snapshot of ``dataset`` (as ``add_source``)."""
    from dsreg._version import __version__

    check_names(dataset, tag)
    fingerprint = scan.fingerprint(dataset, __version__)
    # Under the registry's lock: gc (which forgets every fingerprint) cannot run between the
    # lookup and the tag.
    with reg.lock():
        known = reg.state.scan_result(fingerprint)
        # The revision manifest was stored last; its presence is a cheap check that the state
        # belongs to this registry's store.
        if known is not None and reg.store.has(known[0]):
            revision, snapshot, examples = known
            previous = None
            if tag is not None:
                existing = reg.refs.get(dataset, tag)
                if existing is not None and existing != revision and not force:
                    refuse_tag(dataset, tag, existing, revision)
                previous = reg.refs.set(dataset, tag, revision, force=force, command=command)
            return AddResult(
                dataset=dataset,
                tag=tag,
                revision=revision,
                snapshot=snapshot,
                examples=examples,
                rows=len(scan),
                classes=scan.classes,
                files=len(scan),
                new_objects=0,
                bytes=scan.bytes,
                previous=previous,
            )
        # Payloads first, in worker processes forked before numpy and pyarrow are imported:
        # the parent imports them while the workers read, hash and stage.
        from dsreg.registry.payloads import store_payloads, tree_payloads

        existing = reg.refs.get(dataset, tag) if tag is not None else None
        payloads = tree_payloads(scan)
        stored = store_payloads(
            reg,
            payloads,
            write=not is_dry(existing, force),
            progress=progress,
            meanwhile=_import_ingest,
        )
        from dsreg.registry.ingest import add_locked
        from dsreg.registry.sources import imagefolder_source

        res = add_locked(
            reg,
            dataset,
            imagefolder_source(scan, payloads),
            tag=tag,
            force=force,
            progress=progress,
            command=command,
            stored=stored,
        )
        if not scan.racy():
            reg.state.remember_scan(fingerprint, res.revision, res.snapshot, res.examples)
        return res


def _import_ingest() -> None:
    import dsreg.registry.ingest
    import dsreg.registry.sources  # noqa: F401

"""``dsreg add`` of an ImageFolder tree, with the fast path for a tree added before.

A re-add of an unchanged tree is answered from the scan alone: the scan's fingerprint
(``TreeScan.fingerprint``) names the revision the last add of the same tree made, so nothing is
read, hashed, built or written, and numpy, pyarrow and the JSON Schema validator are not even
imported. Anything else (a new tree, a changed file, a fingerprint the state does not hold, or
one forgotten since by ``gc`` or ``verify``) goes the whole way through ``ingest``.
"""

from __future__ import annotations

from dsreg._util.parallel import gc_paused
from dsreg._util.progress import ProgressHook, no_progress
from dsreg.formats.names import check_lookalike_ids
from dsreg.ingest.result import AddResult, check_names, is_dry, refuse_tag
from dsreg.ingest.treescan import TreeScan
from dsreg.registry.folder import Registry

__all__ = ["add_tree"]


def add_tree(
    reg: Registry,
    dataset: str,
    scan: TreeScan,
    *,
    tag: str | None,
    force: bool = False,
    progress: ProgressHook = no_progress,
    command: str = "",
    extra_provenance: dict[str, object] | None = None,
    allow_lookalike_ids: bool = False,
) -> AddResult:
    """Store the tree ``scan`` describes as a snapshot of ``dataset`` (as ``add_source``).
    Paths of one spelling (``names.id_spelling``) are refused unless ``allow_lookalike_ids``."""
    from dsreg._version import __version__

    check_names(dataset, tag)
    version = __version__
    if extra_provenance:
        # The snapshot depends on the provenance too (a credit given or changed): a re-add
        # with other provenance must not be answered with the last add's revision.
        import json

        version += "\0" + json.dumps(extra_provenance, sort_keys=True)
    if allow_lookalike_ids:
        # Remembered apart: a later add without the option checks the paths again.
        version += "\0allow_lookalike_ids"
    fingerprint = scan.fingerprint(dataset, version)
    # Under the registry's lock: gc (which forgets every fingerprint) cannot run between the
    # lookup and the tag.
    with reg.lock(), gc_paused():
        known = reg.state.scan_result(fingerprint)
        # The revision manifest was stored last; its presence is a cheap check that the state
        # belongs to this registry's store. While an object found corrupt waits for repair,
        # the files are looked at again (store_payloads replaces it if it is theirs).
        if known is not None and reg.store.has(known[0]) and not reg.store.marked_corrupt():
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
        from dsreg.ingest.payloads import store_payloads, tree_payloads

        if not allow_lookalike_ids:
            check_lookalike_ids(scan.ids, what=f"folder {scan.root!r}")
        existing = reg.refs.get(dataset, tag) if tag is not None else None
        payloads = tree_payloads(scan)
        stored = store_payloads(
            reg,
            payloads,
            write=not is_dry(existing, force),
            progress=progress,
            meanwhile=_import_ingest,
        )
        from dsreg.ingest.snapshot import add_locked
        from dsreg.ingest.sources import imagefolder_source

        res = add_locked(
            reg,
            dataset,
            imagefolder_source(scan, payloads),
            tag=tag,
            force=force,
            progress=progress,
            command=command,
            stored=stored,
            extra_provenance=extra_provenance,
        )
        if not scan.racy():
            reg.state.remember_scan(fingerprint, res.revision, res.snapshot, res.examples)
        return res


def _import_ingest() -> None:
    import dsreg.ingest.snapshot
    import dsreg.ingest.sources  # noqa: F401

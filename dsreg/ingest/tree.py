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
from dsreg.ingest.result import AddResult, AddTarget, check_names, is_dry, refuse_moved_tag, set_tag
from dsreg.ingest.treescan import TreeScan
from dsreg.registry.folder import Registry
from dsreg.registry.state import ScanResult

__all__ = ["add_tree"]


def add_tree(
    reg: Registry,
    target: AddTarget,
    scan: TreeScan,
    *,
    progress: ProgressHook = no_progress,
    allow_lookalike_ids: bool = False,
) -> AddResult:
    """Store the tree ``scan`` describes as a snapshot of the target's dataset (as
    ``add_source``). Paths of one spelling (``names.id_spelling``) are refused unless
    ``allow_lookalike_ids``."""
    check_names(target.dataset, target.tag)
    fingerprint = scan.fingerprint(target.dataset, _add_version(target, allow_lookalike_ids))
    # Under the registry's lock: gc (which forgets every fingerprint) cannot run between the
    # lookup and the tag.
    with reg.lock(), gc_paused():
        known = reg.state.scan_result(fingerprint)
        # The revision manifest was stored last; its presence is a cheap check that the state
        # belongs to this registry's store. While an object found corrupt waits for repair,
        # the files are looked at again (store_payloads replaces it if it is theirs).
        if known is not None and reg.store.has(known.revision) and not reg.store.marked_corrupt():
            return _tag_known(reg, target, scan, known)
        res = _store_tree(reg, target, scan, progress, allow_lookalike_ids)
        if not scan.racy():
            reg.state.remember_scan(fingerprint, res.revision, res.snapshot, res.examples)
        return res


def _add_version(target: AddTarget, allow_lookalike_ids: bool) -> str:
    """What, besides the tree, the snapshot an add makes of it depends on: the version of
    dsreg, the provenance given, and whether lookalike paths were allowed."""
    from dsreg._version import __version__

    version = __version__
    if target.extra_provenance:
        # The snapshot depends on the provenance too (a credit given or changed): a re-add
        # with other provenance must not be answered with the last add's revision.
        import json

        version += "\0" + json.dumps(target.extra_provenance, sort_keys=True)
    if allow_lookalike_ids:
        # Remembered apart: a later add without the option checks the paths again.
        version += "\0allow_lookalike_ids"
    return version


def _tag_known(reg: Registry, target: AddTarget, scan: TreeScan, known: ScanResult) -> AddResult:
    """The add of a tree added before, unchanged: the revision the last add made, tagged."""
    refuse_moved_tag(target, target.existing(reg), known.revision)
    return AddResult(
        dataset=target.dataset,
        tag=target.tag,
        revision=known.revision,
        snapshot=known.snapshot,
        examples=known.examples,
        rows=len(scan),
        classes=scan.classes,
        files=len(scan),
        new_objects=0,
        bytes=scan.bytes,
        previous=set_tag(reg, target, known.revision),
    )


def _store_tree(
    reg: Registry,
    target: AddTarget,
    scan: TreeScan,
    progress: ProgressHook,
    allow_lookalike_ids: bool,
) -> AddResult:
    """The whole add of a tree: payloads first, in worker processes forked before numpy and
    pyarrow are imported (the parent imports them while the workers read, hash and stage),
    then the examples table, manifests and tag."""
    from dsreg.ingest.payloads import store_payloads, tree_payloads

    if not allow_lookalike_ids:
        check_lookalike_ids(scan.ids, what=f"folder {scan.root!r}")
    payloads = tree_payloads(scan)
    stored = store_payloads(
        reg,
        payloads,
        write=not is_dry(target.existing(reg), target.force),
        progress=progress,
        meanwhile=_import_ingest,
    )
    from dsreg.ingest.snapshot import add_locked
    from dsreg.ingest.sources import imagefolder_source

    source = imagefolder_source(scan, payloads)
    return add_locked(reg, target, source, progress=progress, stored=stored)


def _import_ingest() -> None:
    import dsreg.ingest.snapshot
    import dsreg.ingest.sources  # noqa: F401

"""``dsreg checkout``: a revision's view as files, plus a pin file ``.dsreg.json``.

ImageFolder sets come back in their layout, each file under its (possibly corrected) class's
folder, so an unchanged ImageFolder loader reads the view's labels. Table sets with payloads
come back at their example ids; label-only sets as ``labels.csv``. Switching a folder from one
revision to another touches only the files that differ. Corrupt bytes are never served, and a
hard or symbolic link is made without reading an object whose trust record vouches for its
stat (``objects``); ``verify=True`` (``--verify``) re-hashes every object. A hard link changes
the object's ctime and link count: the checkout records the stat it has after the link.

A checkout, top-down, as ``checkout`` reads: the folder's lock is taken (``fs.locked``) before
anything in the folder is read; ``plan`` (``plan.py``) reads what the folder holds
(``folder.py``), compares it with the target and refuses before anything is touched; then the
plan is carried out: the objects are vetted (``objects.vet_objects``: for a switch, every one
is checked before the folder is touched), the folder is written (``write.write_folder``: the
journal, the files, ``labels.csv`` and the pin, the journal removed), and the trust records of
what was re-hashed or linked are written.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from dsreg._util.parallel import gc_paused
from dsreg._util.progress import ProgressHook, no_progress
from dsreg._util.records import FieldDict
from dsreg.ops.checkout.folder import LABELS_CSV, PIN, check_folder, read_pin
from dsreg.ops.checkout.fs import locked
from dsreg.ops.checkout.journal import JOURNAL
from dsreg.ops.checkout.objects import Refetch, vet_objects
from dsreg.ops.checkout.plan import CheckoutPlan, LinkType, plan
from dsreg.ops.checkout.write import write_folder
from dsreg.registry.folder import Registry
from dsreg.registry.reader import Resolved
from dsreg.registry.trust import record
from dsreg.views.dataset import Dataset

__all__ = [
    "JOURNAL",
    "LABELS_CSV",
    "PIN",
    "CheckoutPlan",
    "CheckoutResult",
    "LinkType",
    "Refetch",
    "checkout",
    "plan",
    "read_pin",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckoutResult(FieldDict):
    # A label-only set: the labels.csv written (its path) and its rows; None otherwise. First,
    # as ``to_dict`` (the JSON printed) lists them.
    labels_csv: str | None = None
    labels_rows: int | None = None
    revision: str
    path: str
    files: int
    added: int
    removed: int
    unchanged: int
    link: str


def checkout(
    resolved: Resolved,
    target: Path,
    *,
    link: LinkType = "reflink",
    verify: bool = False,
    progress: ProgressHook = no_progress,
) -> CheckoutResult:
    """Materialise ``resolved`` at ``target``; switch an existing checkout incrementally; finish
    a checkout of the folder that was interrupted (its journal), whatever revision it was for.

    Objects are re-hashed before they are placed, unless a hard or symbolic link is made of one
    whose trust record matches its stat (and not ``verify``, which re-hashes every one); a
    lazily cloned registry fetches (verified) what it lacks from the default remote. A
    revision read from a remote (its reader ``fetches``) has an object found absent or corrupt
    fetched again through its reader and re-hashed before it is placed, rather than refused. The
    journal is written before the folder is touched and removed after the pin, which is written
    last. A refusal or failure (a corrupt or missing object, a full disk) leaves a folder that
    was empty empty again; a switch that fails part way leaves its journal, and the next
    checkout of the folder finishes it. Trust records of what was re-hashed or linked are
    written as each chunk of a fresh checkout's work arrives (in a thread, while the workers go
    on), the rest last; a record is written only where the object's stat now differs from it.
    """
    ds = Dataset(resolved)
    reg = resolved.registry
    refetch: Refetch | None = resolved.reader.refetch if resolved.reader.fetches else None
    target = target.absolute()
    check_folder(target)
    # The one thing done before the lock: the lock is taken on the folder itself, so a new one
    # is created (empty) first. Everything that reads the folder (pin, journal, files) comes
    # after, so two checkouts of one folder run one after the other, the second planning
    # against what the first left.
    with locked(target) as created, gc_paused():
        try:
            return _carry_out(
                reg, ds, target, link=link, verify=verify, progress=progress, refetch=refetch
            )
        except BaseException:
            if created:
                # Refused, or failed and emptied again: a folder this checkout made goes too.
                with contextlib.suppress(OSError):
                    target.rmdir()
            raise


def _carry_out(
    reg: Registry,
    ds: Dataset,
    target: Path,
    *,
    link: LinkType,
    verify: bool,
    progress: ProgressHook,
    refetch: Refetch | None,
) -> CheckoutResult:
    """``checkout`` under the folder's lock: plan, vet the objects, write the folder, record
    the objects' stats. A function of its own so that the plan's per-file records are freed
    when it returns, before the cyclic collector, paused meanwhile, runs again (it would walk
    every one of them, for nothing)."""
    planned = plan(target, ds, link=link)
    vetted = vet_objects(
        reg,
        planned.place,
        planned.link,
        switch=not planned.fresh,
        verify=verify,
        progress=progress,
        refetch=refetch,
    )
    write_folder(reg, planned, vetted, progress=progress, refetch=refetch)
    record(reg, vetted.stats.to_record())
    labels = planned.labels_csv is not None
    return CheckoutResult(
        labels_csv=str(planned.target / LABELS_CSV) if labels else None,
        labels_rows=len(ds) if labels else None,
        revision=planned.revision,
        path=str(planned.target),
        files=planned.files,
        added=len(planned.place),
        removed=planned.removed,
        unchanged=planned.unchanged,
        link=planned.link,
    )

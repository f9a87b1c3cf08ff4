"""``dsreg checkout``, first half: compare a folder with a target revision; refuse, or plan.

``plan`` reads the folder's pin file ``.dsreg.json``, the files the pin's revision put there and
the target revision's view, and returns a ``CheckoutPlan``: every path the switch will create,
replace or remove, the blob each one gets, the pin and ``labels.csv`` to write. Every refusal
that needs no object's bytes is raised here, before any file is touched: a path that is not a
folder, a folder of the user's own (no pin), a pin naming a revision this registry cannot read,
an examples table naming something other than a digest. ``dsreg.ops.checkout.apply`` executes
a plan; ``checkout`` there is the two in a row, under the folder's lock.

A plan holds every destination path in one record (``CheckoutPlan.destinations``): a check on
them, or a journal of an interrupted switch, has one place to look.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

from dsreg.errors import CorruptObjectError, DsregError, InputPathError
from dsreg.model.canonical import parse_json
from dsreg.model.schemas import validate
from dsreg.objects.digest import is_digest, short
from dsreg.repo.tables import read_examples
from dsreg.views.dataset import Dataset

__all__ = [
    "LABELS_CSV",
    "PIN",
    "CheckoutPlan",
    "Layout",
    "LinkType",
    "check_folder",
    "file_map",
    "layout_of",
    "plan",
    "read_pin",
]

PIN = ".dsreg.json"
LABELS_CSV = "labels.csv"
LinkType: TypeAlias = Literal["hardlink", "symlink", "copy", "reflink"]
Layout: TypeAlias = Literal["imagefolder", "files", "labels"]
_ALL_DIGESTS = re.compile(r"(?:blake3:[0-9a-f]{64}\n)*blake3:[0-9a-f]{64}")


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckoutPlan:
    """What a checkout will do to ``target``; paths are relative to it, ``/``-separated.

    ``fresh`` means the folder held no pin (it is new or empty): nothing to compare or replace,
    so ``apply`` may link each file straight to its name. ``place`` is in the order the files
    are written; ``remove`` holds the old revision's files that the target does not have at the
    same path with the same bytes (a path in both is replaced: removed, then placed again).
    """

    target: Path
    revision: str
    old_revision: str | None
    layout: Layout
    link: LinkType
    fresh: bool
    place: tuple[tuple[str, str], ...]  # (path, blob digest) to link or copy
    remove: tuple[str, ...]
    dirs: tuple[str, ...]  # folders ``place`` needs, parents before children
    files: int  # the target revision's file count
    removed: int  # files of ``remove`` the target does not have at all
    labels_csv: bytes | None  # label-only sets: the view as labels.csv
    pin: bytes  # the pin file to write last, validated

    @property
    def unchanged(self) -> int:
        return self.files - len(self.place)

    def destinations(self) -> Iterator[str]:
        """Every path ``apply`` creates, replaces or removes, folders first, the pin last."""
        yield from self.dirs
        for rel, _blob in self.place:
            yield rel
        yield from self.remove
        if self.labels_csv is not None:
            yield LABELS_CSV
        yield PIN


def read_pin(target: Path) -> dict[str, Any] | None:
    """The pin file of a checkout folder, validated; ``None`` if it has none."""
    try:
        data = (target / PIN).read_bytes()
    except FileNotFoundError:
        return None
    pin = parse_json(data, what=str(target / PIN))
    validate(pin, "pin", what=str(target / PIN))
    assert isinstance(pin, dict)
    return pin


def check_folder(target: Path) -> None:
    """Refuse a ``target`` that exists and is not a folder."""
    if target.exists() and not target.is_dir():
        raise InputPathError(f"{target} exists and is not a folder; choose another path")


def layout_of(ds: Dataset) -> Layout:
    """How a revision comes back as files: ImageFolder, files at their example ids, or none
    (a label-only set: ``labels.csv``)."""
    kind = ds.snapshot.source.get("kind")
    # A tree imported from elsewhere (kind "dvc") records the layout it was scanned as.
    if kind == "imagefolder" or ds.snapshot.source.get("layout") == "imagefolder":
        return "imagefolder"
    return "files" if ds.snapshot.source.get("files") else "labels"


def file_map(ds: Dataset) -> dict[str, str]:
    """``{relative path: blob digest}`` of a revision's checkout."""
    layout = layout_of(ds)
    if layout == "labels":
        return {}
    # The view's rows and labels, and three columns of the examples table: building the full
    # labels() table costs more than the checkout of a small set.
    ex = read_examples(ds.registry, ds.snapshot, columns=["example_id", "label", "blob"])
    ids = ex.column("example_id").to_pylist()
    blobs = ex.column("blob").to_pylist()
    if ds.view == "original":
        # Every row with its given label, whatever the overlays say (DESIGN.md, "Views"): no
        # need to merge them.
        labels = ex.column("label").to_pylist()
    else:
        v = ds.view_rows()
        rows = v.rows.tolist()
        ids = [ids[r] for r in rows]
        blobs = [blobs[r] for r in rows]
        labels = v.label.tolist()
    if layout == "files":
        return dict(zip(ids, blobs, strict=True))
    classes = ds.classes
    names = [classes[k] for k in labels]
    out: dict[str, str] = {}
    moved: list[tuple[str, str, str, str]] = []
    for eid, blob, name in zip(ids, blobs, names, strict=True):
        first, _, rest = eid.partition("/")
        if first == name:
            out[eid] = blob
        else:
            moved.append((first, rest, name, blob))
    # Relabelled files go last, so a file that keeps its class always keeps its path (and a
    # switch leaves it alone); one whose name its new class already holds is told apart by the
    # class it came from.
    for first, rest, name, blob in moved:
        path = f"{name}/{rest}"
        k = 0
        while path in out:
            k += 1
            path = f"{name}/{first}__{rest.replace('/', '__')}" + (f"~{k}" if k > 1 else "")
        out[path] = blob
    return out


def plan(ds: Dataset, target: Path, *, link: LinkType = "hardlink") -> CheckoutPlan:
    """Compare ``target`` with revision ``ds``; the plan that turns the one into the other.

    Reads the folder (its pin, and whether each file the target keeps is still there), never
    writes. Raises ``InputPathError`` for a folder dsreg may not fill and ``CorruptObjectError``
    for an examples table naming something other than a digest.
    """
    reg = ds.registry
    target = target.absolute()
    check_folder(target)
    old_pin = None
    if target.exists():
        old_pin = read_pin(target)
        if old_pin is None and any(target.iterdir()):
            raise InputPathError(
                f"{target} is not empty and holds no {PIN}; check out into an empty or new folder"
            )
    new = file_map(ds)
    old: dict[str, str] = {}
    relink = False
    if old_pin is not None:
        try:
            old = file_map(Dataset(reg, reg.resolve(old_pin["revision"])))
        except DsregError as e:
            # Without the old revision dsreg cannot tell its files from the user's own: refuse
            # rather than delete anything it did not put there.
            raise InputPathError(
                f"{target} holds revision {short(old_pin['revision'])}, which this registry "
                f"cannot read ({e}); pull that revision first, or check out into a new folder"
            ) from e
        # Another link type: every file is placed again (a copy must not stay a store link).
        relink = old_pin.get("link") != link
    # An empty folder (no pin) holds nothing to compare or replace: every file is placed.
    fresh = old_pin is None
    place = (
        tuple(new.items())
        if fresh
        else tuple(
            (p, b)
            for p, b in new.items()
            if relink or old.get(p) != b or not os.path.lexists(target / p)
        )
    )
    _check_digests(place)
    remove = tuple(p for p, b in old.items() if new.get(p) != b)
    layout = layout_of(ds)
    pin = {
        "schema": "dsreg/pin/1",
        "revision": ds.digest,
        "dataset": ds.name,
        "spec": ds.resolved.spec,
        "snapshot": ds.snapshot_digest,
        "view": ds.view,
        "layout": layout,
        "link": link,
        "files": len(new),
    }
    validate(pin, "pin", what="pin file")
    return CheckoutPlan(
        target=target,
        revision=ds.digest,
        old_revision=None if old_pin is None else old_pin["revision"],
        layout=layout,
        link=link,
        fresh=fresh,
        place=place,
        remove=remove,
        dirs=tuple(sorted({rel.rpartition("/")[0] for rel, _b in place} - {""})),
        files=len(new),
        removed=sum(1 for p in remove if p not in new),
        labels_csv=_labels_csv(ds) if layout == "labels" else None,
        pin=(json.dumps(pin, indent=2, sort_keys=True) + "\n").encode(),
    )


def _check_digests(place: tuple[tuple[str, str], ...]) -> None:
    """Refuse an examples table naming something other than a digest (one pattern match over
    all of them; the per-entry check only runs to name the culprit)."""
    blobs = {b for _r, b in place}
    if blobs and _ALL_DIGESTS.fullmatch("\n".join(blobs)):
        return
    for rel, blob in place:
        if not is_digest(blob):
            raise CorruptObjectError(f"the examples table names {blob!r} for {rel}: not a digest")


def _labels_csv(ds: Dataset) -> bytes:
    t = ds.labels()
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["row", "example_id", "label", "label_name", "given_label", "verdict"])
    cols = [
        t.column(c).to_pylist()
        for c in ("row", "example_id", "label", "label_name", "given_label", "verdict")
    ]
    for r in zip(*cols, strict=True):
        w.writerow(["" if v is None else v for v in r])
    return buf.getvalue().encode()

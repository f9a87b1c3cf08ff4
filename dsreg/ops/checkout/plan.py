"""``dsreg checkout``, first half: compare a folder with a target revision; refuse, or plan.

``plan`` reads what the folder holds (``folder.read_folder``: its pin file ``.dsreg.json`` and
the journal ``.dsreg.journal`` an interrupted checkout left), then the files the revisions
they name put there and the target revision's view, and returns a ``CheckoutPlan``: every path
the switch will create, replace or remove, the blob each one gets, the journal, pin and
``labels.csv`` to write. Every refusal that needs no object's bytes is raised here, before any
file is touched: a path that is not a folder, a folder of the user's own (no pin), a pin or
journal naming a revision this registry cannot read, an examples table naming something other
than a digest, a destination that is not a safe relative path
(``dsreg.formats.names.is_safe_relpath``) or is one of dsreg's own names, a link or a file
where the checkout has a folder. ``checkout`` (``dsreg.ops.checkout.apply``) plans under the
folder's lock, then carries the plan out (``objects.vet_objects``, ``write.write_folder``).

A plan holds every destination path in one record (``CheckoutPlan.destinations``), and every
one of them is checked here.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import starmap
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeAlias

from dsreg.errors import CorruptObjectError, DsregError, InputPathError, ManifestError
from dsreg.formats.names import UNSAFE_PATH, is_safe_relpath
from dsreg.formats.schemas import validate
from dsreg.objects.digest import PREFIX, is_digest, short
from dsreg.objects.hashing import hash_hex
from dsreg.ops.checkout.folder import LABELS_CSV, PIN, FolderState, read_folder
from dsreg.ops.checkout.fs import TMP_PREFIX, ancestors, is_tmp_name, not_a_folder
from dsreg.ops.checkout.journal import JOURNAL, Journal
from dsreg.registry.reader import pinned
from dsreg.registry.tables import has_payloads, is_tree, read_examples
from dsreg.views.dataset import Dataset

if TYPE_CHECKING:
    from dsreg.ops.labels_csv import LabelsCsv

__all__ = [
    "CheckoutPlan",
    "Layout",
    "LinkType",
    "Placement",
    "file_map",
    "layout_of",
    "plan",
]

LinkType: TypeAlias = Literal["hardlink", "symlink", "copy", "reflink"]
Layout: TypeAlias = Literal["imagefolder", "files", "labels"]
# Destinations a checkout refuses, one per line of the joined list: anything that could leave
# the folder (UNSAFE_PATH), and dsreg's own names (the pin, the journal, a temporary name).
_OWN = (
    rf"^(?:{re.escape(PIN)}|{re.escape(JOURNAL)})$"
    rf"|(?:^|/){re.escape(TMP_PREFIX)}[0-9a-f]{{10}}(?:/|$)"
)
_REFUSED = re.compile(rf"{UNSAFE_PATH}|{_OWN}", re.MULTILINE)

# NAME_MAX of Linux and most file systems, in bytes.
_NAME_MAX = 255


class Placement(NamedTuple):
    """A file a checkout places: its path below the folder (``/``-separated) and the digest of
    the object it holds. A tuple: a plan holds one per file, made in one pass."""

    path: str
    blob: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckoutPlan:
    """What a checkout will do to ``target``; paths are relative to it, ``/``-separated.

    ``fresh`` means the folder held no pin and no journal (it is new or empty): nothing to
    compare or replace, so each file may be linked straight to its name. ``place`` is in
    the order the files are written; ``remove`` holds the files the folder may hold (of the
    pin's revision, and of a journal's two) that the target does not have at the same path
    with the same bytes (a path in both is replaced: removed, then placed again).
    ``recovering``: a journal was found, the folder may hold files of several revisions and
    leftover temporary files (in ``leftovers_in``), and every file placed is compared first.
    ``journal`` is written before the folder is touched (``None``: nothing to touch).
    """

    target: Path
    revision: str
    old_revision: str | None
    layout: Layout
    link: LinkType
    fresh: bool
    recovering: bool
    place: tuple[Placement, ...]  # the files to link or copy
    remove: tuple[str, ...]
    dirs: tuple[str, ...]  # folders ``place`` needs, parents before children
    leftovers_in: tuple[str, ...]  # folders ("" the root) to clear of temporary files
    files: int  # the target revision's file count
    removed: int  # files of ``remove`` the target does not have at all
    labels_csv: LabelsCsv | None  # label-only sets: the view as labels.csv, streamed
    journal: Journal | None  # written first, removed after the pin
    pin: bytes  # the pin file to write last, validated

    @property
    def unchanged(self) -> int:
        return self.files - len(self.place)

    def destinations(self) -> Iterator[str]:
        """Every path the checkout creates, replaces or removes: the journal, folders, files, the
        pin last."""
        if self.journal is not None:
            yield JOURNAL
        yield from self.dirs
        for p in self.place:
            yield p.path
        yield from self.remove
        if self.labels_csv is not None:
            yield LABELS_CSV
        yield PIN


def layout_of(ds: Dataset) -> Layout:
    """How a revision comes back as files: ImageFolder, files at their example ids, or none
    (a label-only set: ``labels.csv``)."""
    # The same rule the table checks use (registry/tables.py): a tree imported from elsewhere
    # (kind "dvc") records the layout it was scanned as.
    if is_tree(ds.snapshot):
        return "imagefolder"
    return "files" if has_payloads(ds.snapshot) else "labels"


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
        # Every row with its given label, whatever the overlays say (the "original" view of
        # docs/concepts.md): no need to merge them.
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
            path = _fit(f"{name}/{first}__{rest.replace('/', '__')}" + (f"~{k}" if k > 1 else ""))
        out[path] = blob
    return out


def _fit(path: str) -> str:
    """``path`` with its file name cut to NAME_MAX bytes if longer (a relabelled file's name
    adds its old class to a name that may have used them all): the start, ``~``, 16 hex of the
    whole name's hash and its extension, so that names cut alike stay apart."""
    folder, _, name = path.rpartition("/")
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) <= _NAME_MAX:
        return path
    ext = os.path.splitext(name)[1]
    ext = ext if len(ext.encode()) <= 16 else ""
    room = _NAME_MAX - 17 - len(ext.encode())
    head = raw[:room].decode(errors="ignore")
    return f"{folder}/{head}~{hash_hex(raw)[:16]}{ext}"


def plan(target: Path, ds: Dataset, *, link: LinkType = "reflink") -> CheckoutPlan:
    """The plan that turns folder ``target`` into a checkout of revision ``ds``.

    Reads the folder (its pin and journal, whether each file the target keeps is still there,
    that its folders are folders), never writes. Raises ``InputPathError`` for a folder dsreg
    may not fill, ``CorruptObjectError`` for an examples table naming something other than a
    digest and ``ManifestError`` for a destination outside the folder.
    """
    target = target.absolute()
    before = read_folder(target)
    new = file_map(ds)
    _check_destinations(new, f"revision {short(ds.digest)}")
    olds = [_held_files(ds, target, rev) for rev in before.held]
    recovering = before.journal is not None
    folders: list[str] = []
    if not before.held:
        place = _placements(new.items())
    else:
        folders = ancestors([*new, *(p for old in olds for p in old)])
        _check_folders(target, folders)
        # Another link type: every file is placed again (a copy must not stay a store link).
        again = recovering or any(lk != link for lk in before.held.values())
        place = _placements(
            (p, b)
            for p, b in new.items()
            if again or not _certain(olds, p, b) or not os.path.lexists(target / p)
        )
    _check_digests(place)
    remove = tuple(sorted({p for old in olds for p in old if not _certain(olds, p, new.get(p))}))
    layout = layout_of(ds)
    touches = recovering or bool(place or remove)
    return CheckoutPlan(
        target=target,
        revision=ds.digest,
        old_revision=before.revision,
        layout=layout,
        link=link,
        fresh=not before.held,
        recovering=recovering,
        place=place,
        remove=remove,
        dirs=tuple(sorted({p.path.rpartition("/")[0] for p in place} - {""})),
        leftovers_in=("", *folders) if recovering else (),
        files=len(new),
        removed=sum(1 for p in remove if p not in new),
        labels_csv=_labels_csv(ds) if layout == "labels" else None,
        journal=_switch_journal(before, ds.digest, link) if touches and not recovering else None,
        pin=_pin(ds, layout, link, files=len(new)),
    )


def _labels_csv(ds: Dataset) -> LabelsCsv:
    """A label-only set's ``labels.csv``, streamed. Imported here: the writer brings Arrow's CSV
    module and a pool of threads, which a checkout of files never uses."""
    from dsreg.ops.labels_csv import LabelsCsv

    return LabelsCsv(ds)


def _switch_journal(before: FolderState, revision: str, link: LinkType) -> Journal:
    """The journal of a switch from the pinned revision to ``revision``."""
    return Journal(
        from_revision=before.revision, from_link=before.link, to_revision=revision, link=link
    )


def _check_folders(target: Path, folders: Iterable[str]) -> None:
    """Refuse a link or a file where one of ``folders`` (parents first) should be a folder,
    before anything is touched (while the work runs, the folder descriptors of ``fs`` are the
    guard)."""
    root = os.fspath(target)
    for d in folders:
        try:
            st = os.lstat(f"{root}/{d}")
        except FileNotFoundError:
            continue
        except NotADirectoryError:
            raise not_a_folder(root, d.rpartition("/")[0] or d) from None
        if not stat.S_ISDIR(st.st_mode):
            raise not_a_folder(root, d)


def _placements(items: Iterable[tuple[str, str]]) -> tuple[Placement, ...]:
    """``(path, blob)`` pairs as the plan's placements."""
    return tuple(starmap(Placement, items))


def _pin(ds: Dataset, layout: Layout, link: LinkType, *, files: int) -> bytes:
    """The pin file a checkout of ``ds`` writes last, validated."""
    pin = {
        "schema": "dsreg/pin/1",
        "revision": ds.digest,
        "dataset": ds.name,
        "spec": ds.resolved.spec,
        "snapshot": ds.snapshot_digest,
        "view": ds.view,
        "layout": layout,
        "link": link,
        "files": files,
    }
    validate(pin, "pin", what="pin file")
    return (json.dumps(pin, indent=2, sort_keys=True) + "\n").encode()


def _certain(olds: list[dict[str, str]], path: str, blob: str | None) -> bool:
    """Whether ``path`` holds ``blob`` (``None``: nothing) whichever revision put it there."""
    return all(old.get(path) == blob for old in olds)


def _held_files(ds: Dataset, target: Path, revision: str) -> dict[str, str]:
    """The file map of a revision the folder holds (or may hold), checked like any other."""
    try:
        old = file_map(Dataset(pinned(ds.resolved.reader, revision)))
    except DsregError as e:
        # Without the old revision dsreg cannot tell its files from the user's own: refuse
        # rather than delete anything it did not put there.
        raise InputPathError(
            f"{target} holds revision {short(revision)}, which this registry "
            f"cannot read ({e}); pull that revision first, or check out into a new folder"
        ) from e
    _check_destinations(old, f"revision {short(revision)}, which {target} holds,")
    return old


# What every refused destination holds, joined one per line: a backslash or NUL, an empty
# line or part ("\n\n", "//", a "/" or line break at an end), a leading "/", or a part starting
# with "." (".", "..", and dsreg's own names). A list holding none of these holds no refused
# path, which a few substring searches tell without the pattern (tests/ops/test_plan_checks.py).
_SUSPECT = ("\\", "\x00", "\n\n", "\n/", "//", "/\n", "/.", "\n.")


def _surely_safe(joined: str) -> bool:
    """Whether the destinations joined one per line surely include no refused one."""
    if not joined or joined.startswith(("/", ".", "\n")) or joined.endswith(("/", "\n")):
        return False
    return not any(s in joined for s in _SUSPECT)


def _check_destinations(paths: dict[str, str], what: str) -> None:
    """Refuse a path that could leave the folder or that is one of dsreg's own names. A few
    substring searches over all of them, then one pattern search where those cannot rule a
    refusal out; the per-path check only runs to name the culprit (a line break inside an id
    can make the joined search match where no path is refused)."""
    if not paths:
        return
    joined = "\n".join(paths)
    if _surely_safe(joined) or not _REFUSED.search(joined):
        return
    for p in paths:
        if (
            not is_safe_relpath(p)
            or p in (PIN, JOURNAL)
            or any(is_tmp_name(part) for part in p.split("/"))
        ):
            raise ManifestError(
                f"{what} would write {p!r}, which is not a safe path below the checkout folder "
                "(no '..', '.', empty part, leading '/', backslash, NUL, or dsreg's own names "
                f"{PIN}, {JOURNAL}, {TMP_PREFIX}…): nothing was checked out"
            )


def _all_digests(blobs: list[str]) -> bool:
    """Whether every one of ``blobs`` is a digest, ``blake3:`` and 64 lowercase hex digits:
    joined one per line, every line is 71 characters starting with the prefix, and the prefixes
    taken out, nothing but hex digits and line breaks is left (byte operations, no pattern)."""
    n = len(blobs)
    joined = "\n".join(blobs)
    if not joined.isascii() or len(joined) != 72 * n - 1:
        return False
    if joined.count("\n") != n - 1 or joined[71::72] != "\n" * (n - 1):
        return False
    if joined.count(_PREFIX_NL) != n - 1:
        return False
    if not joined.startswith(PREFIX):
        return False
    rest = joined.encode("ascii").replace(_PREFIX_B, b"")
    return len(rest) == 65 * n - 1 and not rest.translate(None, _HEX_NL)


_PREFIX_NL = "\n" + PREFIX
_PREFIX_B = PREFIX.encode()
_HEX_NL = b"0123456789abcdef\n"


def _check_digests(place: Sequence[tuple[str, str]]) -> None:
    """Refuse an examples table naming something other than a digest (one pass of byte
    operations over all of them; the per-entry check only runs to name the culprit)."""
    blobs = list({b for _r, b in place})
    if blobs and _all_digests(blobs):
        return
    for rel, blob in place:
        if not is_digest(blob):
            raise CorruptObjectError(f"the examples table names {blob!r} for {rel}: not a digest")

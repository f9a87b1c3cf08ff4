"""Yanked tags and retired datasets, as PyPI yanks a release (PEP 592).

A mark is an object, canonical JSON: a yank ``{"mark": "yank", "dataset", "tag", "revision",
"reason"}``, a retirement ``{"mark": "retire", "dataset", "successor", "reason"}``. It is named
by a ref, ``yanked/<dataset>/<tag>`` or ``retired/<dataset>/<successor>``, written as a tag is
(``RefStore`` with another folder: under the dataset's lock, after its line in
``logs/<dataset>.jsonl``, events ``yank``, ``unyank``, ``retire``), so ``dsreg log`` lists them
and push, pull and clone carry them as they carry tags (``dsreg.remote.results``).

A yanked tag is left out of listings and of any default choice of tag, and still resolves when
named exactly; its reason (and a retired dataset's successor) is told when the tag is read, once,
at the door (``dsreg.registry.reader``), as a ``YankedWarning``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsreg._util.jsonread import read_line
from dsreg.errors import DsregError, IntegrityError, InvalidInputError
from dsreg.formats.canonical import canonical_bytes
from dsreg.objects.store import ObjectStore
from dsreg.registry.markrefs import RETIRED, YANKED, retired_refs, yank_refs
from dsreg.registry.refs import RefStore

__all__ = [
    "MarkProblem",
    "Retirement",
    "Yank",
    "check_reason",
    "mark_bytes",
    "mark_objects",
    "mark_problems",
    "parse_mark",
    "read_retirement",
    "read_yanks",
]

_MAX_REASON = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class Yank:
    reason: str
    revision: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Retirement:
    reason: str
    successor: str


def check_reason(reason: str | None, *, what: str) -> str:
    """``reason`` stripped; ``InvalidInputError`` if it is empty, has control characters, or
    is longer than ``_MAX_REASON`` (1000) characters."""
    text = (reason or "").strip()
    if not text:
        raise InvalidInputError(f"{what} needs a reason: give --reason TEXT (not empty)")
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text):
        raise InvalidInputError(f"the reason for {what} holds a control character; write one line")
    if len(text) > _MAX_REASON:
        raise InvalidInputError(
            f"the reason for {what} is {len(text)} characters; at most {_MAX_REASON}"
        )
    return text


def mark_bytes(fields: dict[str, str]) -> bytes:
    return canonical_bytes(fields)


def parse_mark(data: bytes, *, kind: str, dataset: str, name: str) -> dict[str, str]:
    """The fields of mark ``data``, checked: a mark of ``kind`` (``yank``, ``retire``) of
    ``dataset`` whose tag (or successor) is ``name``; ``IntegrityError`` saying what is wrong."""
    obj, why = read_line(data)
    key = "tag" if kind == "yank" else "successor"
    if why is None and not (
        isinstance(obj, dict)
        and all(isinstance(v, str) for v in obj.values())
        and obj.get("mark") == kind
        and obj.get("dataset") == dataset
        and obj.get(key) == name
        and obj.get("reason")
    ):
        why = f"not the {kind} of {dataset} {name}"
    if why is not None:
        raise IntegrityError(f"a {kind} mark of {dataset} is damaged: {why}")
    fields: dict[str, str] = obj
    return fields


def _read_mark(
    store: ObjectStore, digest: str | DsregError, kind: str, dataset: str, name: str
) -> dict[str, str]:
    """The fields of one mark, verified; ``DsregError`` saying why it cannot be used."""
    if isinstance(digest, DsregError):
        raise digest
    return parse_mark(store.read_bytes(digest), kind=kind, dataset=dataset, name=name)


def _marks(store: ObjectStore, refs: RefStore, dataset: str, kind: str) -> dict[str, Any]:
    """``{name: fields}`` of one dataset's marks; one that cannot be read is skipped (it hides
    nothing: the tag is served unmarked, and ``dsreg verify`` names what is damaged)."""
    out = {}
    for name, digest in refs.entries(dataset).items():
        try:
            out[name] = _read_mark(store, digest, kind, dataset, name)
        except DsregError:
            continue
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkProblem:
    """A yank or retirement that cannot be used: its ref (``yanked/<dataset>/<tag>``), the
    digest it names (``None`` for a damaged ref file) and why."""

    ref: str
    digest: str | None
    problem: str


def mark_problems(root: Path) -> list[MarkProblem]:
    """Every yank and retirement ref whose file is damaged, or whose mark object is missing,
    corrupt, or not the mark of that dataset and name (each is served as if absent)."""
    store = ObjectStore(root)
    out = []
    for folder, kind in ((YANKED, "yank"), (RETIRED, "retire")):
        refs = RefStore(root, refs=folder)
        for dataset in refs.datasets():
            for name, digest in refs.entries(dataset).items():
                if isinstance(digest, DsregError):
                    why = "its file is damaged: it holds no digest"
                else:
                    try:
                        _read_mark(store, digest, kind, dataset, name)
                        continue
                    except DsregError as e:
                        why = str(e)
                out.append(
                    MarkProblem(
                        ref=f"{folder}/{dataset}/{name}",
                        digest=None if isinstance(digest, DsregError) else digest,
                        problem=why,
                    )
                )
    return out


def read_yanks(root: Path, dataset: str) -> dict[str, Yank]:
    """``{tag: Yank}`` of one dataset's yanked tags."""
    found = _marks(ObjectStore(root), yank_refs(root), dataset, "yank")
    return {t: Yank(reason=f["reason"], revision=f.get("revision", "")) for t, f in found.items()}


def read_retirement(root: Path, dataset: str) -> Retirement | None:
    found = _marks(ObjectStore(root), retired_refs(root), dataset, "retire")
    for successor, f in sorted(found.items()):
        return Retirement(reason=f["reason"], successor=successor)
    return None


def mark_objects(root: Path) -> set[str]:
    """The digests every yank and retirement ref names (gc keeps them; a damaged ref names
    none)."""
    out: set[str] = set()
    for refs in (yank_refs(root), retired_refs(root)):
        for ds in refs.datasets():
            out.update(d for d in refs.entries(ds).values() if isinstance(d, str))
    return out

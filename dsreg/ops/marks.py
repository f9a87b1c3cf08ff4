"""``dsreg yank DATASET@TAG``: withdraw a tag without removing it (PEP 592's yank), and
``dsreg retire DATASET --successor OTHER``: name the dataset that replaces one. Both are refs
naming a mark object, logged in the dataset's ref log (``dsreg.registry.marks``)."""

from __future__ import annotations

from dataclasses import dataclass

from dsreg.errors import InvalidInputError, RevisionNotFoundError
from dsreg.formats.names import check_name, parse_tag_target
from dsreg.registry.folder import Registry
from dsreg.registry.markrefs import retired_refs, yank_refs
from dsreg.registry.marks import check_reason, mark_bytes

__all__ = ["MarkResult", "retire_dataset", "yank_tag"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkResult:
    """A yank (``tag`` set), its undoing (``undone``), or a retirement (``successor`` set)."""

    dataset: str
    tag: str | None
    reason: str
    revision: str | None = None
    successor: str | None = None
    undone: bool = False

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"dataset": self.dataset, "reason": self.reason}
        if self.successor is not None:
            return d | {"retired": {"successor": self.successor, "reason": self.reason}}
        yanked = None if self.undone else {"reason": self.reason}
        return d | {"tag": self.tag, "revision": self.revision, "yanked": yanked}


def yank_tag(
    reg: Registry, name: str, reason: str | None, *, undo: bool = False, command: str = ""
) -> MarkResult:
    """Yank tag ``name`` (``dataset@tag``) for ``reason``; with ``undo``, lift its yank.
    ``RevisionNotFoundError`` for an unknown tag, ``InvalidInputError`` for an empty reason or
    an undo of a tag that is not yanked."""
    dataset, tag = parse_tag_target(name)
    digest = reg.refs.get(dataset, tag)
    if digest is None:
        tags = ", ".join(reg.refs.tags(dataset)) or "none"
        raise RevisionNotFoundError(
            f"no tag {dataset}@{tag} to yank (tags of {dataset!r}: {tags}); see 'dsreg ls'",
            dataset=dataset,
            ref=tag,
        )
    refs = yank_refs(reg.root)
    if undo:
        if refs.get(dataset, tag) is None:
            raise InvalidInputError(f"tag {dataset}@{tag} is not yanked: nothing to undo")
        refs.delete(dataset, tag, command=command, event="unyank")
        return MarkResult(dataset=dataset, tag=tag, reason="", revision=digest, undone=True)
    text = check_reason(reason, what=f"yanking {dataset}@{tag}")
    fields = {"mark": "yank", "dataset": dataset, "tag": tag, "revision": digest, "reason": text}
    # One shared lock from storing the mark to its ref: a gc in between would remove it.
    with reg.lock():
        mark = reg.store.put_bytes(mark_bytes(fields))
        refs.set(dataset, tag, mark, force=True, command=command, event="yank")
    return MarkResult(dataset=dataset, tag=tag, reason=text, revision=digest)


def retire_dataset(
    reg: Registry, dataset: str, successor: str, reason: str | None, *, command: str = ""
) -> MarkResult:
    """Retire ``dataset`` in favour of ``successor`` (a dataset with tags here) for
    ``reason``. A dataset retired already is retired again (the log keeps both)."""
    check_name(dataset, what="dataset name")
    check_name(successor, what="successor dataset name")
    if not reg.refs.tags(dataset):
        raise RevisionNotFoundError(
            f"no dataset {dataset!r} to retire in this registry; see 'dsreg ls'", dataset=dataset
        )
    if successor == dataset:
        raise InvalidInputError(f"dataset {dataset!r} cannot succeed itself; name another")
    if not reg.refs.tags(successor):
        raise RevisionNotFoundError(
            f"no successor dataset {successor!r} in this registry: add or pull it first "
            "(see 'dsreg ls')",
            dataset=successor,
        )
    text = check_reason(reason, what=f"retiring {dataset}")
    fields = {"mark": "retire", "dataset": dataset, "successor": successor, "reason": text}
    refs = retired_refs(reg.root)
    with reg.lock():
        mark = reg.store.put_bytes(mark_bytes(fields))
        refs.set(dataset, successor, mark, force=True, command=command, event="retire")
        for other in refs.tags(dataset):
            if other != successor:
                refs.delete(dataset, other, command=command, event="retire")
    return MarkResult(dataset=dataset, tag=None, reason=text, successor=successor)

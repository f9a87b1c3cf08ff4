"""What a review is about: the overlay whose rows are queued, with its corrections; and what
the page shows of a queued row's example (its payload's digest and size, its metadata
columns)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final, NamedTuple

import pyarrow as pa

from dsreg.errors import InvalidInputError
from dsreg.formats.manifests import Overlay, Snapshot
from dsreg.formats.questions.answers import EXACT_ANSWER, LETTERS, MULTIPLE_CHOICE
from dsreg.formats.tables import served_metadata
from dsreg.objects.digest import hex_of, short
from dsreg.registry.folder import Registry
from dsreg.registry.reader import Resolved
from dsreg.registry.tables import read_corrections, read_examples
from dsreg.reviewing.access import Access, access_path, load_access
from dsreg.reviewing.queue import Item, Pair
from dsreg.reviewing.votelog import log_path

__all__ = ["Queued", "Shown", "shown_examples"]

_METADATA_COLUMNS: Final = 20
_METADATA_CHARS: Final = 200
# A question set's question, choices and answer, which the rater judges the label by, are shown
# at up to this length (MMLU's longest questions run to a few thousand characters).
_QUESTION_CHARS: Final = 4000
_QUESTION_COLUMNS: Final = frozenset({"question", "choices", "answer"})


class Queued:
    """The overlay a review of revision ``base`` is about, and its corrections: ``overlay`` (a
    digest or prefix) when given, else the revision's last overlay, or with ``audit`` its last
    audit overlay (whose findings are reviewed as pairs, ``pairs.py``)."""

    def __init__(self, base: Resolved, overlay: str | None, *, audit: bool = False) -> None:
        self.registry = reg = base.registry
        self.spec = spec = base.spec
        self.resolved: Resolved = base
        rev = self.resolved.revision
        self.snapshot: Snapshot = reg.snapshot(rev.snapshot)
        if overlay is None:
            self.digest = _last_overlay(reg, spec, rev.overlays, audit=audit)
        else:
            self.digest = reg.resolve_object(overlay)
            if reg.manifest_kind(self.digest) != "overlay":
                raise InvalidInputError(
                    f"{overlay!r} is not an overlay; see 'dsreg overlay ls {self.resolved.dataset}'"
                )
        self.overlay: Overlay = reg.overlay(self.digest)
        if audit and self.overlay.kind != "audit":
            raise InvalidInputError(
                f"--audit reviews an audit's findings, and overlay {short(self.digest)} is a "
                f"{self.overlay.kind} overlay; drop --overlay, or name an audit overlay"
            )
        if self.overlay.base != rev.snapshot:
            raise InvalidInputError(
                f"overlay {short(self.digest)} corrects snapshot {short(self.overlay.base)}, "
                f"not {spec!r}'s ({short(rev.snapshot)}); pick an overlay of this snapshot"
            )
        self.corrections = read_corrections(reg, self.overlay, base=self.snapshot)

    @property
    def pairs(self) -> bool:
        """Whether the queue is an audit's findings, each reviewed as a pair."""
        return self.overlay.kind == "audit"

    @property
    def log_path(self) -> Path:
        return log_path(self.registry.root, hex_of(self.digest))

    def stored_access(self) -> Access | None:
        """The review's links and settings, as its last server stored them (None: none yet)."""
        return load_access(access_path(self.log_path))


def _last_overlay(reg: Registry, named: str, overlays: Sequence[str], *, audit: bool) -> str:
    if audit:
        found = [d for d in overlays if reg.overlay(d).kind == "audit"]
        if not found:
            raise InvalidInputError(
                f"{named!r} has no audit overlay to review; find duplicates first with 'dsreg "
                f"audit duplicates {named} --against OTHER --tag NAME' and review that tag"
            )
        return found[-1]
    if not overlays:
        raise InvalidInputError(
            f"{named!r} has no overlay to review; flag rows first with 'dsreg detect "
            f"{named} --pred-probs FILE --tag NAME' and review that tag, or pass --overlay"
        )
    return overlays[-1]


class Shown(NamedTuple):
    """What the page shows of a queued row's example besides its labels."""

    blob: str | None
    size: int | None
    metadata: tuple[tuple[str, str], ...]

    def item(
        self,
        row: int,
        example_id: object,
        given: int,
        *,
        suggested: int | None = None,
        score: float | None = None,
        pair: Pair | None = None,
    ) -> Item:
        """The queue's item of ``row`` with this example: a label question (``suggested``,
        ranked by ``score``) or an audit's finding (``pair``)."""
        return Item(
            row=row,
            example_id=str(example_id),
            given=given,
            suggested=suggested,
            score=score,
            blob=self.blob,
            size=self.size,
            metadata=self.metadata,
            pair=pair,
        )


def _shown(snap: Snapshot, name: str, value: object) -> str:
    """A metadata value as the page shows it: cut at 200 characters; a question set's
    question, choices and answer at 4,000, a multiple-choice row's choices one a line, each
    after its letter (``B. Paris``), the letter the page's labels name."""
    if value is None:
        return ""
    if snap.task not in (MULTIPLE_CHOICE, EXACT_ANSWER) or name not in _QUESTION_COLUMNS:
        return str(value)[:_METADATA_CHARS]
    if snap.task == MULTIPLE_CHOICE and name == "choices" and isinstance(value, list):
        value = "\n".join(f"{letter}. {text}" for letter, text in zip(LETTERS, value, strict=False))
    return str(value)[:_QUESTION_CHARS]


def shown_examples(q: Queued, rows: Sequence[int]) -> list[Shown]:
    """The payload digest, size and metadata (those the views serve, the first 20, each value
    cut at 200 characters; a question set's own columns as ``_shown`` shows them) of each of
    ``rows``, in their order."""
    examples = read_examples(q.registry, q.snapshot).take(pa.array(rows, pa.int64()))
    meta_names = served_metadata(examples.column_names)[:_METADATA_COLUMNS]
    meta = {name: examples.column(name).to_pylist() for name in meta_names}
    blobs = examples.column("blob").to_pylist()
    sizes = examples.column("size").to_pylist()
    return [
        Shown(
            blob=blobs[i],
            size=sizes[i],
            metadata=tuple((name, _shown(q.snapshot, name, meta[name][i])) for name in meta_names),
        )
        for i in range(len(rows))
    ]

"""Dataset and tag names, and revision specs.

A spec is ``dataset@tag``, ``dataset@<prefix>`` or ``blake3:<hex>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from dsreg._util.lazy import lazy_imports
from dsreg.errors import DatasetFormatError, InvalidNameError, InvalidSpecError
from dsreg.objects.digest import MIN_PREFIX, PREFIX, is_digest

# Only comparing example ids for lookalikes (an add, an import) normalises them.
with lazy_imports():
    import unicodedata

__all__ = [
    "TRAILING_SPACE",
    "UNSAFE_PATH",
    "Spec",
    "TagName",
    "check_lookalike_ids",
    "check_name",
    "id_spelling",
    "is_safe_component",
    "is_safe_relpath",
    "lookalike_error",
    "lookalike_ids",
    "pair_lookalikes",
    "parse_spec",
    "parse_tag_target",
]

# What makes a relative POSIX path unsafe to write under a folder: empty, a leading "/", a
# backslash (a Windows separator), a NUL, or an empty, "." or ".." part. Example ids of sets
# with files are such paths (a checkout writes each file at its id, or at class/rest for an
# ImageFolder set, whose class names are single parts). RE2 and Python's re read it alike:
# pyarrow checks whole columns with it.
UNSAFE_PATH = r"^$|^/|\\|\x00|(^|/)\.{0,2}(/|$)"
_UNSAFE = re.compile(UNSAFE_PATH)

# Unicode's White_Space characters, written literally so that RE2 and Python's re read the
# class alike. TRAILING_SPACE is RE2's form of a run of them ending a path part (RE2 has no
# lookahead; its "$" is the end of the text): pyarrow replaces it with "\1".
_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
TRAILING_SPACE = f"[{_SPACE}]+(/|$)"
_TRAILING = re.compile(f"[{_SPACE}]+(?=/|\\Z)")
# An id without any of these (printable ASCII, no space) is its own spelling.
_NOT_PLAIN = re.compile("[^!-~]")

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_HEX = re.compile(r"^[0-9a-f]+$")


def check_name(name: str, *, what: str = "name") -> str:
    """Return ``name`` if it is a valid dataset or tag name, else raise ``InvalidNameError``."""
    # fullmatch, not match: "$" also matches before a trailing newline.
    if not _NAME.fullmatch(name):
        raise InvalidNameError(
            f"invalid {what} {name!r}: use 1 to 64 characters from a-z, 0-9, '.', '_', '-', "
            "starting with a letter or digit",
            name=name,
            what=what,
        )
    return name


def is_safe_relpath(path: str) -> bool:
    """Whether ``path`` stays below the folder it is written under (``UNSAFE_PATH``)."""
    return _UNSAFE.search(path) is None


def is_safe_component(name: str) -> bool:
    """Whether ``name`` is one safe path part (a class folder): no "/" and safe."""
    return "/" not in name and is_safe_relpath(name)


def id_spelling(example_id: str) -> str:
    """The form example ids are compared in for lookalikes: Unicode NFC, and no whitespace at
    the end of any path part. Two ids of one spelling are one file where a checkout lands on a
    file system that normalises names (macOS) or drops trailing spaces (Windows)."""
    return _TRAILING.sub("", unicodedata.normalize("NFC", example_id))


def lookalike_ids(ids: Sequence[str]) -> list[tuple[str, str]]:
    """Each id whose spelling an earlier, different id has, as (earlier, later), in row order
    (identical ids are another check's). One scan of the joined ids answers the usual case:
    printable ASCII without spaces is its own spelling."""
    if _NOT_PLAIN.search("/".join(ids)) is None:
        return []
    return pair_lookalikes((i if _NOT_PLAIN.search(i) is None else id_spelling(i), i) for i in ids)


def pair_lookalikes(spelled: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """``lookalike_ids`` of ids given with their spellings, ``(spelling, id)`` in row order."""
    seen: dict[str, str] = {}
    pairs = []
    for spelling, i in spelled:
        first = seen.setdefault(spelling, i)
        if first != i:
            pairs.append((first, i))
    return pairs


def lookalike_error(what: str, pairs: Sequence[tuple[str, str]]) -> DatasetFormatError:
    """The refusal of ids of one spelling (``pairs`` as ``lookalike_ids`` gives them), naming
    the first two as ``ascii`` writes them, so that the difference is visible."""
    a, b = pairs[0]
    more = f" ({len(pairs)} ids in all look like an earlier one)" if len(pairs) > 1 else ""
    return DatasetFormatError(
        f"{what}: example ids {a!a} and {b!a} differ only in Unicode normalisation "
        f"(NFC/NFD) or trailing whitespace{more}, and would be one file in a checkout on macOS "
        "or Windows; rename one in the source, or give --allow-lookalike-ids "
        "(allow_lookalike_ids=True) to keep them as they are"
    )


def check_lookalike_ids(ids: Sequence[str], *, what: str) -> None:
    """Refuse ids of one spelling (``lookalike_ids``) with ``lookalike_error``."""
    pairs = lookalike_ids(ids)
    if pairs:
        raise lookalike_error(what, pairs)


@dataclass(frozen=True, slots=True, kw_only=True)
class Spec:
    """A parsed revision spec. ``digest`` is set for a bare full digest; ``ref`` is a tag or a
    hex prefix (which of the two is decided against the registry: a tag wins, as in git)."""

    dataset: str | None
    ref: str | None
    digest: str | None = None

    def __str__(self) -> str:
        if self.digest is not None:
            return self.digest
        return f"{self.dataset}@{self.ref}"

    @property
    def could_be_prefix(self) -> bool:
        r = (self.ref or "").removeprefix(PREFIX)
        return len(r) >= MIN_PREFIX and bool(_HEX.fullmatch(r))


def parse_spec(text: str) -> Spec:
    """Parse ``dataset@tag``, ``dataset@<hex prefix>``, ``dataset@blake3:<hex>``, ``blake3:…``."""
    text = text.strip()
    if text.startswith(PREFIX):
        if is_digest(text):
            return Spec(dataset=None, ref=None, digest=text)
        raise InvalidSpecError(
            f"{text!r} is not a full digest: a bare digest needs 'blake3:' and all 64 hex "
            "characters; for a prefix, write dataset@<prefix>",
            spec=text,
        )
    if "@" not in text:
        raise InvalidSpecError(
            f"{text!r} names no revision: write dataset@tag (e.g. {text}@original), "
            "dataset@<digest prefix> or blake3:<hex>",
            spec=text,
        )
    dataset, _, ref = text.partition("@")
    check_name(dataset, what="dataset name")
    if ref.startswith(PREFIX):
        return Spec(dataset=dataset, ref=ref)
    check_name(ref, what="tag or digest prefix")
    return Spec(dataset=dataset, ref=ref)


class TagName(NamedTuple):
    """A tag's name: ``dataset@tag``."""

    dataset: str
    tag: str


def parse_tag_target(text: str) -> TagName:
    """Parse the ``dataset@tag`` a new tag is created at."""
    if "@" not in text:
        raise InvalidSpecError(
            f"{text!r} names no tag: write dataset@tag, e.g. {text}@v1", spec=text
        )
    dataset, _, tag = text.partition("@")
    return TagName(check_name(dataset, what="dataset name"), check_name(tag, what="tag name"))

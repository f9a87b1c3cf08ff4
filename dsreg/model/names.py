"""Dataset and tag names, and revision specs.

A spec is ``dataset@tag``, ``dataset@<prefix>`` or ``blake3:<hex>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsreg.errors import InvalidNameError, InvalidSpecError
from dsreg.objects.digest import MIN_PREFIX, PREFIX, is_digest

__all__ = [
    "UNSAFE_PATH",
    "Spec",
    "check_name",
    "is_safe_component",
    "is_safe_relpath",
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


def parse_tag_target(text: str) -> tuple[str, str]:
    """Parse the ``dataset@tag`` a new tag is created at."""
    if "@" not in text:
        raise InvalidSpecError(
            f"{text!r} names no tag: write dataset@tag, e.g. {text}@v1", spec=text
        )
    dataset, _, tag = text.partition("@")
    return check_name(dataset, what="dataset name"), check_name(tag, what="tag name")

"""Where the review page finds a label-only set's payloads: a folder the team holds
(``--media DIR``) or an address template (``--media-url``), and what kind each payload is.

A folder is read only, and only inside itself. The file of an example is found from its
example id, never from anything a request says (the server maps the item's row to its id):

1. ``DIR/<example_id>``, the id read as a relative path (``airplane/0001.png``), when that is a
   file;
2. else ``DIR/<example_id>.<ext>`` for each ``ext`` of ``EXTENSIONS``, in that order
   (``3828`` -> ``3828.png``).

An id that is absolute, holds a ``..`` part, a backslash or a NUL names no file; a file whose
resolved path (every symlink followed) leaves the folder is refused, and so is one that is not
a regular file or is larger than ``MAX_BYTES``. The kind of a payload is decided from its
content, never its name (``sniff``): an image or audio type from its magic bytes, else text
when it is UTF-8, else opaque bytes, never HTML.

A template's ``{example_id}`` is replaced by the id, URL-quoted (``/`` kept, so a path-like id
stays a path); the page loads that address itself, as an image, or as audio when the address
ends in one of ``AUDIO_EXTENSIONS``. The page's Content-Security-Policy allows the template's
origin for images and media only.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Final
from urllib.parse import quote, urlsplit

from dsreg.errors import InvalidInputError, NotFoundError

__all__ = [
    "AUDIO_EXTENSIONS",
    "EXTENSIONS",
    "MAX_BYTES",
    "Media",
    "MediaRefusedError",
    "find_media",
    "media_origin",
    "sniff",
]

EXTENSIONS: Final = ("png", "jpg", "jpeg", "gif", "webp", "txt", "wav", "mp3", "ogg", "flac")
AUDIO_EXTENSIONS: Final = ("wav", "mp3", "ogg", "oga", "flac", "m4a")
MAX_BYTES: Final = 64 << 20
PLACEHOLDER: Final = "{example_id}"
_MAGIC: Final = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"fLaC", "audio/flac"),
    (b"OggS", "audio/ogg"),
    (b"ID3", "audio/mpeg"),
    (b"\xff\xfb", "audio/mpeg"),
    (b"\xff\xf3", "audio/mpeg"),
)


def sniff(data: bytes) -> str:
    """The content type a payload is served with: an image or audio type only from its magic
    bytes, else text when it is UTF-8, else opaque bytes (never HTML, whatever the bytes say)."""
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "audio/wav"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream"
    return "text/plain; charset=utf-8"


class MediaRefusedError(InvalidInputError):
    """An example's media file lies outside the ``--media`` folder, or is not a regular file."""


@dataclass(frozen=True, slots=True)
class Media:
    """A review's payloads from outside the store: ``folder`` (resolved) or ``url`` (a
    template with ``{example_id}``), at most one of them; and, for a pair review of an audit,
    ``corpus`` (resolved), the unregistered folder its matches are files of."""

    folder: Path | None = None
    url: str | None = None
    corpus: Path | None = None

    @classmethod
    def of(
        cls,
        folder: str | os.PathLike[str] | None,
        url: str | None,
        corpus: str | os.PathLike[str] | None = None,
    ) -> Media:
        """The ``--media``/``--media-url`` options, checked: a folder that exists, a template
        that is an http(s) address with a host and ``{example_id}``; and ``--corpus``, a folder
        that exists."""
        if corpus is not None:
            if not Path(corpus).is_dir():
                raise InvalidInputError(
                    f"--corpus {os.fspath(corpus)!r} is not a folder; give the folder the audit "
                    "read with --against DIR"
                )
            return replace(cls.of(folder, url), corpus=Path(corpus).resolve())
        if folder is not None and url is not None:
            raise InvalidInputError("give --media or --media-url, not both")
        if folder is not None:
            path = Path(folder)
            if not path.is_dir():
                raise InvalidInputError(
                    f"--media {os.fspath(folder)!r} is not a folder; give the folder that "
                    "holds the set's files, named by example id"
                )
            return cls(folder=path.resolve())
        if url is not None:
            media_origin(url)
            return cls(url=url)
        return cls()

    @property
    def given(self) -> bool:
        return self.folder is not None or self.url is not None

    def address(self, example_id: str) -> str:
        """The template's address of ``example_id``."""
        assert self.url is not None
        return self.url.replace(PLACEHOLDER, quote(example_id, safe="/"))


def media_origin(template: str) -> str:
    """The origin (``scheme://host[:port]``) of a ``--media-url`` template, which the page's
    policy allows for images and media; a template that is not an http(s) address with a host
    and ``{example_id}`` in its path or query is refused."""
    if PLACEHOLDER not in template:
        raise InvalidInputError(
            f"--media-url {template!r} has no {PLACEHOLDER}; e.g. "
            f"'https://files.example/cifar10/{PLACEHOLDER}'"
        )
    try:
        parts = urlsplit(template.replace(PLACEHOLDER, "x"))
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or PLACEHOLDER in template.split("//", 1)[1].split("/", 1)[0]
        or any(c in template for c in " \"'\\;,\n\r\t")
    ):
        raise InvalidInputError(
            f"--media-url {template!r} is not an http(s) address with a host and "
            f"{PLACEHOLDER} in its path; e.g. 'https://files.example/cifar10/{PLACEHOLDER}'"
        )
    return f"{parts.scheme}://{parts.netloc}"


def _candidates(example_id: str) -> list[PurePosixPath]:
    """The relative paths ``example_id`` may name, in the order they are tried (none for an
    id that is absolute or holds ``..``, a backslash or a NUL)."""
    if not example_id or "\\" in example_id or "\0" in example_id:
        return []
    path = PurePosixPath(example_id)
    if path.is_absolute() or ".." in path.parts:
        return []
    return [path, *(PurePosixPath(f"{example_id}.{ext}") for ext in EXTENSIONS)]


def find_media(folder: Path, example_id: str, *, option: str = "--media") -> bytes:
    """The bytes of ``example_id``'s file under ``folder`` (resolved), by the module's rule;
    ``NotFoundError`` when there is none, ``MediaRefusedError`` when the file found leaves the
    folder, is not a regular file or is too large. ``option`` names the folder in the errors:
    ``--media``, or ``--corpus`` for an audit's matches."""
    for relative in _candidates(example_id):
        candidate = folder.joinpath(relative)
        if not os.path.lexists(candidate):
            continue
        resolved = candidate.resolve()
        if not resolved.is_relative_to(folder):
            raise MediaRefusedError(
                f"the media file of example {example_id!r} leads outside the {option} folder; "
                "not served"
            )
        if resolved.is_file():
            return _read(resolved, example_id)
        if resolved.exists() and not resolved.is_dir():  # a pipe, a socket: never opened
            raise _not_regular(example_id)
    raise NotFoundError(
        f"no media file for example {example_id!r} in the {option} folder (looked for the id "
        f"as a path, then with .{', .'.join(EXTENSIONS)}); skip it"
    )


def _not_regular(example_id: str) -> MediaRefusedError:
    return MediaRefusedError(
        f"the media file of example {example_id!r} is not a regular file; not served"
    )


def _read(path: Path, example_id: str) -> bytes:
    """A regular file's bytes, opened without following a symlink (its path is resolved)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise MediaRefusedError(
            f"cannot open the media file of example {example_id!r}: {e.strerror or e}"
        ) from e
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(example_id)
        if info.st_size > MAX_BYTES:
            raise MediaRefusedError(
                f"the media file of example {example_id!r} is {info.st_size} bytes, more than "
                f"{MAX_BYTES}; not served"
            )
        return f.read(MAX_BYTES + 1)[:MAX_BYTES]

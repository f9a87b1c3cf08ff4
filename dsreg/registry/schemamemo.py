"""Which stored manifests have passed their schema check: ``state/schema-checked/<key>/<hex>``.

A manifest's schema check is a pure function of its bytes and of the schemas, and an object's
bytes are fixed by its digest, which every read re-hashes (``ObjectStore.read_bytes``). So once
the bytes of digest ``d`` have been hashed to ``d`` and then passed the check, every later read
of ``d`` that hashes to ``d`` again would pass it too: the check is skipped for it, the hash
check never. That keeps the schema validator (and what its extension imports) off the path of
a command that reads only manifests it has read before, such as a repeated ``dsreg tag``.

- The memo of digest ``blake3:<hex>`` is an empty file named ``<hex>``: its existence is all it
  says, so it cannot be torn, and reading it costs one ``stat``. It is created (``O_EXCL``) only
  after the bytes it names were hashed to that digest and validated.
- ``<key>`` is a digest of the manifest schemas' own bytes: a changed schema starts an empty
  memo, so nothing passed under an older schema skips the newer one.
- A memo that is missing, unreadable or cannot be written (a read-only registry) only means the
  check runs again. Like the rest of ``state/`` it is local, never pushed, and safe to delete.
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

from dsreg.formats.schemas import schema_dir
from dsreg.objects.digest import PREFIX, is_digest
from dsreg.objects.hashing import hash_bytes

__all__ = ["FOLDER", "MANIFEST_SCHEMAS", "SchemaMemo"]

FOLDER = "schema-checked"
# The schemas a stored manifest is checked against (``dsreg.formats.manifests``).
MANIFEST_SCHEMAS = ("snapshot", "overlay", "revision")


@functools.cache
def _schemas_key() -> str:
    """16 hex digits of the digest of the manifest schemas' bytes, read once per process."""
    parts = [(schema_dir() / f"{name}.schema.json").read_bytes() for name in MANIFEST_SCHEMAS]
    return hash_bytes(b"\0".join(parts)).removeprefix(PREFIX)[:16]


class SchemaMemo:
    """The manifests of registry ``root`` whose verified bytes passed the schema check."""

    __slots__ = ("_folder", "_root")

    def __init__(self, root: Path) -> None:
        self._folder: Path | None = None
        self._root = root

    @property
    def folder(self) -> Path | None:
        """This registry's memo folder for the current schemas; ``None`` if the schemas cannot
        be read (then nothing is remembered and every manifest is checked)."""
        if self._folder is None:
            try:
                key = _schemas_key()
            except OSError:
                return None
            self._folder = self._root / "state" / FOLDER / key
        return self._folder

    def checked(self, digest: str) -> bool:
        """Whether the bytes of ``digest`` passed the schema check before. Only the schema
        check may be skipped on a ``True``: the caller has hashed the bytes to ``digest``."""
        folder = self.folder
        if folder is None:
            return False
        try:
            return os.stat(folder / _name(digest)).st_size == 0
        except (OSError, ValueError):
            return False

    def remember(self, digest: str) -> None:
        """Record that bytes hashed to ``digest`` passed the schema check. Call it only after
        both; a memo that cannot be written is not an error (the check runs next time)."""
        folder = self.folder
        if folder is None:
            return
        path = folder / _name(digest)
        for _ in range(2):
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444))
                return
            except FileExistsError:
                return
            except FileNotFoundError:
                with contextlib.suppress(OSError):
                    folder.mkdir(parents=True, exist_ok=True)
            except (OSError, ValueError):
                return


def _name(digest: str) -> str:
    if not is_digest(digest):
        raise ValueError(f"not a digest: {digest!r}")
    return digest.removeprefix(PREFIX)

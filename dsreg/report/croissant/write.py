"""``dsreg export SPEC -o DIR --format croissant``: the Croissant document and every file it
describes, written to a new folder; ``--format datacite``: the DataCite record, one file.

The folder appears whole or not at all: it is filled beside its destination (a hidden folder
in the same parent), every file fsynced, then renamed into place. A destination that exists
must be an empty folder (it is replaced); anything else is refused before any work. Every
object copied is read through the store, its BLAKE3 digest checked: a damaged object is
refused, never exported.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from dsreg._util.fs import write_atomic
from dsreg.errors import DsregError, InvalidInputError, StorageError
from dsreg.registry.folder import Registry
from dsreg.registry.reader import Resolved
from dsreg.report.cite import cite
from dsreg.report.croissant.datacite import datacite_of
from dsreg.report.croissant.document import build
from dsreg.report.labelexport import ExportResult

__all__ = ["DOCUMENT", "write_croissant", "write_datacite"]

DOCUMENT = "croissant.json"
_COPY_WHOLE = 64 << 20


def _check_destination(dest: Path) -> None:
    if dest.is_dir():
        try:
            empty = not any(dest.iterdir())
        except OSError as e:
            raise StorageError(f"cannot read {dest}: {e.strerror}", path=str(dest)) from e
        if not empty:
            raise InvalidInputError(
                f"{dest} is a folder that is not empty; give a new folder for the Croissant "
                "export (it writes croissant.json and the files it describes)"
            )
    elif os.path.lexists(dest):
        raise InvalidInputError(
            f"{dest} exists and is not a folder; give a new folder for the Croissant export"
        )
    if not dest.parent.is_dir():
        raise InvalidInputError(f"the folder {dest.parent} does not exist; make it first")


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _copy_object(reg: Registry, digest: str, path: Path) -> None:
    size = reg.store.path(digest).stat().st_size
    if size <= _COPY_WHOLE:
        _write_file(path, reg.store.read_bytes(digest))
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(reg.store.verified_path(digest), path)
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def write_croissant(
    r: Resolved,
    output: str | os.PathLike[str],
    *,
    authors: tuple[str, ...] = (),
    url: str | None = None,
) -> ExportResult:
    """Write revision ``r``'s Croissant document (``croissant.json``) and the files it
    describes into the new folder ``output`` (module docstring), ``authors`` its creators;
    ``rows``: the view's."""
    dest = Path(output)
    _check_destination(dest)
    c = build(r, authors=authors, url=url)
    reg = r.registry
    try:
        tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.tmp-"))
    except OSError as e:
        raise StorageError(f"cannot write in {dest.parent}: {e.strerror}", path=str(dest)) from e
    try:
        for rel, data in c.files.items():
            _write_file(tmp / rel, data)
        for rel, digest in c.objects.items():
            _copy_object(reg, digest, tmp / rel)
        text = json.dumps(c.document, indent=2, ensure_ascii=False) + "\n"
        _write_file(tmp / DOCUMENT, text.encode("utf-8"))
        if dest.is_dir():
            dest.rmdir()  # empty, checked above
        os.rename(tmp, dest)
    except BaseException as e:
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)
        if isinstance(e, OSError) and not isinstance(e, DsregError):
            raise StorageError(f"cannot write {dest}: {e.strerror}", path=str(dest)) from e
        raise
    return ExportResult(
        revision=r.digest, output=str(dest), format="croissant", align="view", rows=c.rows,
        removed=0,
    )  # fmt: skip


def write_datacite(
    r: Resolved,
    output: str | os.PathLike[str],
    *,
    authors: tuple[str, ...] = (),
    url: str | None = None,
) -> ExportResult:
    """Write revision ``r``'s DataCite record (JSON) to ``output``, atomically."""
    dest = Path(output)
    if dest.is_dir():
        raise InvalidInputError(f"{dest} is a folder; give a file name, e.g. {dest}/datacite.json")
    c = cite(r, authors=authors, url=url)
    text = json.dumps(datacite_of(c, r.revision), indent=2, ensure_ascii=False) + "\n"
    try:
        write_atomic(dest, text.encode("utf-8"))
    except OSError as e:
        raise StorageError(f"cannot write {dest}: {e.strerror}", path=str(dest)) from e
    return ExportResult(
        revision=r.digest, output=str(dest), format="datacite", align="view", rows=c.rows,
        removed=0,
    )  # fmt: skip

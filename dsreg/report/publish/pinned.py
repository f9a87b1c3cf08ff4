"""Pinned views: a revision's view as one Parquet object on a remote, named by its SHA-256,
that any engine (DuckDB, Polars, Spark, Ray Data) reads by URL without dsreg.

A remote holds them beside its objects:

- ``views/sha256/<64 hex>.parquet``: the view's rows, ``row, example_id, label, label_name``
  (``dsreg export --align view``), named by the SHA-256 of its bytes, which a reader checks
  with ``sha256sum`` and an engine's own tools alike;
- ``views/<dataset>/<revision hex>.json``: the pin, naming that object, its size and rows.

A revision's rows never change (its digest fixes them), so a view is computed and uploaded once:
an export of a revision the remote already pins reads the pin, finds its object there and
uploads nothing. The object is written before its pin, each whole (a folder's staged and
renamed, an object store's one PUT), so a pin never names a missing or partial object.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

from dsreg._util.jsonread import loads
from dsreg._util.records import FieldDict
from dsreg.errors import DsregError, IntegrityError, StorageError
from dsreg.formats.canonical import canonical_bytes
from dsreg.objects.digest import PREFIX
from dsreg.registry.reader import Resolved
from dsreg.remote.store import RemoteStore
from dsreg.report.labelexport import export_labels

__all__ = ["PINS", "PinnedView", "pin_view", "pinned_views"]

#: The folder of a remote's pinned views.
PINS = "views"
_HASH = "sha256"
_PIN_BYTES = 1 << 16
_CHUNK = 1 << 20
_SHA = re.compile("[0-9a-f]{64}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PinnedView(FieldDict):
    """A view pinned on a remote: ``path`` below the remote's root, ``url`` where the remote
    puts it, ``sha256`` of its bytes; ``uploaded`` is False when the remote held it already."""

    dataset: str
    revision: str
    view: str
    format: str
    rows: int
    size: int
    sha256: str
    path: str
    url: str
    uploaded: bool


def _pin_path(rs: RemoteStore, dataset: str, revision: str) -> str:
    return rs.path(PINS, dataset, revision.removeprefix(PREFIX) + ".json")


def _object_relpath(sha: str) -> str:
    return f"{PINS}/{_HASH}/{sha}.parquet"


def url_of(rs: RemoteStore, relpath: str) -> str:
    """Where a file below the remote's root is reached: its URL, or a folder's absolute path."""
    if rs.local:
        return os.path.join(os.path.abspath(rs.root), *relpath.split("/"))
    return rs.url.rstrip("/") + "/" + relpath


def _read_pin(rs: RemoteStore, dataset: str, revision: str) -> dict[str, Any] | None:
    """The remote's pin of ``revision``, or ``None`` if it has none (or one that does not name
    an object it holds whole: that pin is written again)."""
    path = _pin_path(rs, dataset, revision)
    data = rs.read(path, f"read the pinned view of {dataset} from", limit=_PIN_BYTES)
    if data is None:
        return None
    try:
        pin = loads(data, what=f"pin {path}", error=IntegrityError, max_bytes=_PIN_BYTES)
    except IntegrityError:
        return None  # damaged: written again
    if not (
        isinstance(pin, dict)
        and pin.get("revision") == revision
        and pin.get("dataset") == dataset
        and isinstance(pin.get("sha256"), str)
        and _SHA.fullmatch(pin["sha256"]) is not None
        and pin.get("path") == _object_relpath(pin["sha256"])
        and isinstance(pin.get("size"), int)
        and isinstance(pin.get("rows"), int)
    ):
        return None
    sha, size = pin["sha256"], pin["size"]
    return pin if _held_size(rs, sha) == size else None


def _held_size(rs: RemoteStore, sha: str) -> int | None:
    """The size of the remote's object ``sha``, ``None`` if it lacks it."""
    path = rs.path(*_object_relpath(sha).split("/"))
    try:
        return os.stat(path).st_size if rs.local else int(rs.fs.size(path))
    except FileNotFoundError:
        return None
    except OSError as e:
        raise rs.error(f"read {path} on", e) from None


def pin_view(r: Resolved, rs: RemoteStore) -> PinnedView:
    """Pin revision ``r``'s view on ``rs`` (module docstring); the remote must be writable."""
    pin = _read_pin(rs, r.dataset, r.digest)
    if pin is not None:
        return _pinned(rs, pin, uploaded=False)
    return _pinned(rs, _compute_and_upload(r, rs), uploaded=True)


def _pinned(rs: RemoteStore, pin: dict[str, Any], *, uploaded: bool) -> PinnedView:
    return PinnedView(
        dataset=str(pin["dataset"]),
        revision=str(pin["revision"]),
        view=str(pin.get("view", "")),
        format="parquet",
        rows=int(pin["rows"]),
        size=int(pin["size"]),
        sha256=str(pin["sha256"]),
        path=str(pin["path"]),
        url=url_of(rs, str(pin["path"])),
        uploaded=uploaded,
    )


def _compute_and_upload(r: Resolved, rs: RemoteStore) -> dict[str, Any]:
    """Write the view's Parquet in the registry's ``tmp/``, hash it, send it, then its pin."""
    dataset, digest = r.dataset, r.digest
    with tempfile.TemporaryDirectory(dir=r.registry.root / "tmp", prefix="pin-") as tmp:
        local = os.path.join(tmp, "view.parquet")
        res = export_labels(r, local, format="parquet", align="view")
        sha, size = _sha256(local)
        rel = _object_relpath(sha)
        _send(rs, local, rel)
    pin = {
        "dataset": dataset,
        "format": "parquet",
        "path": rel,
        "revision": digest,
        "rows": res.rows,
        "sha256": sha,
        "size": size,
        "view": str(r.revision.view),
    }
    rs.write(_pin_path(rs, dataset, digest), canonical_bytes(pin))
    return pin


def _sha256(path: str) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _send(rs: RemoteStore, local: str, rel: str) -> None:
    """The file whole at ``rel`` on the remote: a folder's copied to a temporary name beside it
    and renamed, an object store's one upload."""
    dest = rs.path(*rel.split("/"))
    try:
        if rs.local:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dest), prefix=".pin-", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as out, open(local, "rb") as src:
                    shutil.copyfileobj(src, out, _CHUNK)
                    out.flush()
                    os.fsync(out.fileno())
                os.chmod(tmp, 0o444)
                os.replace(tmp, dest)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        else:
            rs.fs.put_file(local, dest)
    except DsregError:
        raise
    except OSError as e:
        raise StorageError(f"cannot write {dest}: {e.strerror}", path=dest) from e
    except Exception as e:
        raise rs.error(f"write {dest} to", e) from None


def pinned_views(rs: RemoteStore, dataset: str) -> dict[str, PinnedView]:
    """``{revision: PinnedView}`` of the views the remote pins for ``dataset`` (a pin that
    cannot be read is left out: it is written again by the next export)."""
    base = rs.path(PINS, dataset)
    try:
        paths = sorted(rs.fs.find(base))
    except FileNotFoundError:
        return {}
    except Exception as e:
        raise rs.error(f"list the pinned views of {dataset} on", e) from None
    out: dict[str, PinnedView] = {}
    for p in paths:
        name = os.path.basename(str(p))
        if not name.endswith(".json"):
            continue
        revision = PREFIX + name.removesuffix(".json")
        try:
            pin = _read_pin(rs, dataset, revision)
        except DsregError:
            continue
        if pin is not None:
            out[revision] = _pinned(rs, pin, uploaded=False)
    return out

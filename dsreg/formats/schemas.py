"""JSON Schemas (draft 2020-12) of every manifest and file format, shipped in the wheel."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from dsreg._util.jsonread import MANIFEST_BYTES, loads
from dsreg._util.lazy import lazy_imports
from dsreg.errors import ManifestError

# jsonschema-rs (Rust): it checks each schema against the draft 2020-12 meta-schema when it
# compiles it, and it imports in a third of the time the pure-Python jsonschema takes. Its
# extension still imports email.utils, socket and decimal, so it is imported on first use: a
# command reading only manifests whose check is remembered (dsreg.registry.schemamemo) never
# loads it.
with lazy_imports():
    import jsonschema_rs

__all__ = ["SCHEMA_NAMES", "schema_dir", "validate"]

SCHEMA_NAMES = ("snapshot", "overlay", "revision", "pin", "config")


def schema_dir() -> Path:
    """The folder holding ``<name>.schema.json``: inside the wheel, else the source tree's.

    Found beside this package's files rather than through ``importlib.resources``, whose
    readers (zipfile among them) every command that reads a manifest would import."""
    here = Path(__file__).resolve().parents[1]
    packaged = here / "schemas"
    return packaged if packaged.is_dir() else here.parent / "schemas"


@functools.cache
def _validator(name: str) -> jsonschema_rs.Validator:
    path = schema_dir() / f"{name}.schema.json"
    schema = loads(path.read_bytes(), what=str(path), error=ManifestError, max_bytes=MANIFEST_BYTES)
    return jsonschema_rs.Draft202012Validator(schema)


def validate(obj: Any, name: str, *, what: str) -> None:
    """Check ``obj`` against schema ``name``; raise ``ManifestError`` naming ``what``, the fault."""
    errors = sorted(
        _validator(name).iter_errors(obj), key=lambda e: [str(p) for p in e.instance_path]
    )
    if errors:
        e = errors[0]
        where = "/".join(str(p) for p in e.instance_path) or "(top level)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ManifestError(f"{what} breaks schema {name!r} at {where}: {e.message}{more}")

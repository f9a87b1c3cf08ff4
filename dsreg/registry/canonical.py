"""Canonical JSON (RFC 8785, JSON Canonicalization Scheme): the bytes a manifest is hashed over.

The same manifest, written by any program on any machine, has the same bytes and so the same
digest. dsreg stores exactly these bytes, so an object's digest is the digest of its file.
"""

from __future__ import annotations

import json
from typing import Any

import rfc8785

from dsreg.errors import ManifestError

__all__ = ["canonical_bytes", "parse_json"]


def canonical_bytes(obj: Any) -> bytes:
    """RFC 8785 bytes of a JSON-able value."""
    try:
        return bytes(rfc8785.dumps(obj))
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as e:
        raise ManifestError(f"cannot canonicalise manifest: {e}") from e


def parse_json(data: bytes, *, what: str) -> Any:
    """Parse JSON bytes, naming ``what`` in the error."""
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ManifestError(f"{what} is not valid JSON: {e}") from e

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

_SAFE = 2**53 - 1


def canonical_bytes(obj: Any) -> bytes:
    """RFC 8785 bytes of a JSON-able value."""
    try:
        return bytes(rfc8785.dumps(_as_doubles(obj)))
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as e:
        raise ManifestError(f"cannot canonicalise manifest: {e}") from e


def _as_doubles(obj: Any) -> Any:
    """Integers beyond 2**53 that a double holds exactly, as that double (RFC 8785 numbers are
    IEEE 754 doubles; the rfc8785 package refuses every int beyond 2**53). Ints no double holds
    are refused rather than rounded."""
    if isinstance(obj, bool):
        return obj
    if isinstance(obj, int) and not -_SAFE <= obj <= _SAFE:
        try:
            f = float(obj)
        except OverflowError:
            f = float("inf")
        if f != obj:
            raise ManifestError(
                f"cannot canonicalise manifest: the integer {obj} is not exactly a JSON number "
                "(an IEEE 754 double); write it as a string"
            )
        return f
    if isinstance(obj, dict):
        return {k: _as_doubles(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_as_doubles(v) for v in obj]
    return obj


def _parse_int(text: str) -> int | float:
    # RFC 8785 numbers are doubles, and JCS writes 2.6494964730572530e16 as digits: digits
    # beyond 2**53 are read as the double they stand for, so what was read encodes the same.
    if len(text) <= 17:
        n = int(text)
        if -_SAFE <= n <= _SAFE:
            return n
    return float(text)


def parse_json(data: bytes, *, what: str) -> Any:
    """Parse JSON bytes, naming ``what`` in the error."""
    try:
        return json.loads(data, parse_int=_parse_int)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ManifestError(f"{what} is not valid JSON: {e}") from e

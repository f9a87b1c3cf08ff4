"""Canonical JSON (RFC 8785, JSON Canonicalization Scheme): the bytes a manifest is hashed over.

The same manifest, written by any program on any machine, has the same bytes and so the same
digest. dsreg stores exactly these bytes, so an object's digest is the digest of its file.
"""

from __future__ import annotations

from typing import Any

import rfc8785

from dsreg._util.jsonread import MANIFEST_BYTES, MAX_DEPTH, loads
from dsreg.errors import ManifestError

__all__ = ["canonical_bytes", "parse_json"]

_SAFE = 2**53 - 1


def canonical_bytes(obj: Any) -> bytes:
    """RFC 8785 bytes of a JSON-able value, refused (``ManifestError``) where ``parse_json``
    would refuse to read them back: nested deeper than ``MAX_DEPTH`` or larger than
    ``MANIFEST_BYTES``."""
    try:
        data = bytes(rfc8785.dumps(_as_doubles(obj, 1)))
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as e:
        raise ManifestError(f"cannot canonicalise manifest: {e}") from e
    if len(data) > MANIFEST_BYTES:
        raise ManifestError(
            f"a manifest of {len(data):,} bytes is more than the {MANIFEST_BYTES:,} dsreg reads "
            "back; a snapshot's manifest holds its class names: give fewer, shorter ones"
        )
    return data


def _as_doubles(obj: Any, depth: int) -> Any:
    """Integers beyond 2**53 that a double holds exactly, as that double (RFC 8785 numbers are
    IEEE 754 doubles; the rfc8785 package refuses every int beyond 2**53). Ints no double holds
    are refused rather than rounded; so is nesting deeper than any manifest is read back."""
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
    if isinstance(obj, dict | list | tuple) and depth > MAX_DEPTH:
        raise ManifestError(
            f"cannot canonicalise manifest: it nests deeper than {MAX_DEPTH} levels, more than "
            "dsreg reads back; flatten its parameters"
        )
    if isinstance(obj, dict):
        return {k: _as_doubles(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_as_doubles(v, depth + 1) for v in obj]
    return obj


def _parse_int(text: str) -> int | float:
    # RFC 8785 numbers are doubles, and JCS writes 2.6494964730572530e16 as digits: digits
    # beyond 2**53 are read as the double they stand for, so what was read encodes the same.
    if len(text) <= 17:
        n = int(text)
        if -_SAFE <= n <= _SAFE:
            return n
    return float(text)


def parse_json(data: bytes, *, what: str, hint: str = "") -> Any:
    """Parse the JSON bytes of a manifest, a pin file or a journal (the bounded reader, with
    canonical numbers), naming ``what`` in the error (a ``ManifestError``), then ``hint``."""
    return loads(
        data,
        what=what,
        error=ManifestError,
        max_bytes=MANIFEST_BYTES,
        parse_int=_parse_int,
        hint=hint,
    )

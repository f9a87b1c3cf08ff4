"""Stable JSON for reports a paper cites: sorted keys, two-space indent, floats with fixed
decimals (``0.953000``, never ``0.9530000000000001``), so the same result prints the same bytes."""

from __future__ import annotations

import math
from json.encoder import encode_basestring  # what json.dumps(s, ensure_ascii=False) writes
from typing import Any

__all__ = ["stable_json"]


def stable_json(data: Any, *, decimals: int = 6) -> str:
    """``data`` (dicts, lists, str, int, float, bool, None) as stable JSON text, newline-ended."""
    return _dump(data, decimals, 0) + "\n"


def _dump(x: Any, decimals: int, level: int) -> str:
    pad = "  " * (level + 1)
    end = "  " * level
    if isinstance(x, dict):
        if not x:
            return "{}"
        items = [
            f"{pad}{encode_basestring(str(k))}: {_dump(x[k], decimals, level + 1)}"
            for k in sorted(x, key=str)
        ]
        return "{\n" + ",\n".join(items) + "\n" + end + "}"
    if isinstance(x, list | tuple):
        if not x:
            return "[]"
        return "[\n" + ",\n".join(pad + _dump(v, decimals, level + 1) for v in x) + "\n" + end + "]"
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(int(x))
    if isinstance(x, float):
        return "null" if not math.isfinite(x) else f"{x:.{decimals}f}"
    if isinstance(x, str):
        return encode_basestring(x)
    raise TypeError(f"cannot write {type(x).__name__} as stable JSON")

"""Stable JSON for reports a paper cites: sorted keys, two-space indent, floats with fixed
decimals (``0.953000``, never ``0.9530000000000001``), so the same result prints the same bytes."""

from __future__ import annotations

import json
import math
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
            f"{pad}{json.dumps(str(k), ensure_ascii=False)}: {_dump(x[k], decimals, level + 1)}"
            for k in sorted(x, key=str)
        ]
        return "{\n" + ",\n".join(items) + "\n" + end + "}"
    if isinstance(x, list | tuple):
        if not x:
            return "[]"
        return "[\n" + ",\n".join(pad + _dump(v, decimals, level + 1) for v in x) + "\n" + end + "]"
    if isinstance(x, bool) or x is None:
        return json.dumps(x)
    if isinstance(x, int):
        return str(int(x))
    if isinstance(x, float):
        return "null" if not math.isfinite(x) else f"{x:.{decimals}f}"
    if isinstance(x, str):
        return json.dumps(x, ensure_ascii=False)
    raise TypeError(f"cannot write {type(x).__name__} as stable JSON")

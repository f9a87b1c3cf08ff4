"""How long the ref log keeps what its lines name from gc: git's ``gc.reflogExpire``, read
from the registry's ``gc.log_expiry`` setting or ``gc --prune-log-older-than``."""

from __future__ import annotations

import math
import re

from dsreg.errors import InvalidInputError

__all__ = ["DEFAULT_LOG_EXPIRY", "parse_duration"]

#: How long a log line keeps what it names from gc (git's ``gc.reflogExpire``).
DEFAULT_LOG_EXPIRY = "90d"

_DURATION = re.compile(r"([0-9]{1,9})([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """Seconds in a duration: ``90d``, ``2w``, ``12h``, ``30m``, ``45s``; ``now`` is 0 and
    ``never`` infinite. ``InvalidInputError`` naming the text otherwise."""
    t = text.strip().lower() if isinstance(text, str) else ""
    if t == "now":
        return 0.0
    if t == "never":
        return math.inf
    m = _DURATION.fullmatch(t)
    if m is None:
        raise InvalidInputError(
            f"invalid duration {text!r}: give a number and a unit (s, m, h, d or w), e.g. "
            "'90d' or '2w', or 'now' or 'never'"
        )
    return float(int(m.group(1)) * _UNITS[m.group(2)])

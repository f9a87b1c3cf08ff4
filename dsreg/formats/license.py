"""A dataset's licence, as its snapshot records it (``source.license``, from ``dsreg add
--license``) or ``dsreg publish --license`` gives it: one identifier of the SPDX licence list,
in its canonical case (``CC-BY-4.0``, ``MIT``), or the ``http(s)`` URL of a licence not on it.

A snapshot made without a licence has no ``license`` key, so the digests of snapshots made
before the key existed are unchanged; the same data with another licence is another snapshot,
as with another credit. packaging's copy of the SPDX list (the one PEP 639 metadata is checked
against) says which identifiers exist and their canonical case, so a misspelt identifier is
refused rather than published. Expressions (``MIT OR Apache-2.0``) and ``LicenseRef-`` ids are
refused: the Croissant, CFF and DataCite fields a licence fills each take one licence, and a
licence the list lacks is named by its URL.
"""

from __future__ import annotations

import re

from dsreg._util.lazy import lazy_imports
from dsreg.errors import InvalidInputError

# packaging parses the SPDX list on import: imported when a licence is checked.
with lazy_imports():
    from packaging import licenses

__all__ = ["SPDX_LIST", "check_license", "is_url", "license_url"]

#: Where the SPDX licence list is, and each licence's page on it.
SPDX_LIST = "https://spdx.org/licenses/"
_MAX = 2048
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*")
_URL = re.compile(r"https?://[!-~]+")  # printable ASCII, no space
_UNSAFE_IN_URL = frozenset('"<>\\^`{|}')


def is_url(license: str) -> bool:
    """Whether a checked licence is a URL (else it is an SPDX identifier)."""
    return license.startswith(("http://", "https://"))


def license_url(license: str) -> str:
    """The URL of a checked licence: its own, or its page on the SPDX list (what Croissant
    recommends for ``license``)."""
    return license if is_url(license) else f"{SPDX_LIST}{license}.html"


def check_license(text: str, *, what: str = "--license") -> str:
    """``text`` as a licence is recorded: an SPDX identifier in its canonical case, or a URL as
    given; ``InvalidInputError`` naming ``what`` for anything else."""
    given = text.strip()
    hint = (
        f"{what} {text!r}: give one SPDX licence identifier (e.g. CC-BY-4.0, MIT; the list is "
        f"at {SPDX_LIST}) or the http(s) URL of the licence"
    )
    if given.startswith(("http://", "https://")):
        if len(given) > _MAX or not _URL.fullmatch(given) or _UNSAFE_IN_URL & set(given):
            raise InvalidInputError(f"{hint}: that URL has a space or a character URLs escape")
        return given
    if not given or len(given) > 100 or "://" in given:
        raise InvalidInputError(hint)
    try:
        canonical = licenses.canonicalize_license_expression(given)
    except licenses.InvalidLicenseExpression:
        raise InvalidInputError(f"{hint}: it is not on the SPDX list") from None
    if not _ID.fullmatch(canonical) or canonical.startswith("LicenseRef-"):
        raise InvalidInputError(
            f"{hint}: one licence, not an expression or a LicenseRef (name a licence the list "
            "lacks by its URL)"
        )
    return canonical

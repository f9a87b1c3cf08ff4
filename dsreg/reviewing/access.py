"""Who may use a review's page, kept with the review so that a restart changes nothing for an
open page: the operator's token, the shared raters' token, one token per named rater, the
secret that signs item tickets, and the port and votes per item the last server used.

``<registry>/review/<hex of the queue overlay>/session.json``, beside the votes log, written
by the server that holds the log's lock: a temporary file, fsynced, renamed over the old one,
the folder fsynced (mode 0600: it holds the tokens). A link is ``?token=<token>``; the operator
finishes the review, a rater only answers. A named rater's link says who they are; the shared
link lets raters name themselves. Names are compared case-insensitively: stored casefolded.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from dsreg._util.fs import write_durable
from dsreg._util.jsonread import loads
from dsreg.errors import InvalidInputError, StorageError

__all__ = ["Access", "Visitor", "access_path", "load_access", "rater_name", "save_access"]

_NAME: Final = "session.json"
_VERSION: Final = 1
_MAX_NAME: Final = 64


def rater_name(name: object) -> str:
    """A rater's name as the review records it: 1 to 64 printable characters, spaces trimmed,
    casefolded (``Rater1`` and ``RATER1`` are ``rater1``)."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError("a reviewer name is required: type your name on the page")
    name = name.strip()
    if len(name) > _MAX_NAME or not name.isprintable():
        raise InvalidInputError(
            f"reviewer name {name[:80]!r} must be 1 to {_MAX_NAME} printable characters"
        )
    return name.casefold()


def access_path(log: Path) -> Path:
    """The access file of the review whose votes log is ``log``."""
    return log.parent / _NAME


@dataclass(frozen=True, slots=True)
class Visitor:
    """Who a token belongs to: the operator, or a rater (``name`` when the link names them)."""

    operator: bool
    name: str | None
    token: str


def _token() -> str:
    return secrets.token_urlsafe(24)


@dataclass(frozen=True, slots=True, kw_only=True)
class Access:
    """The tokens of one review (``raters``: casefolded name -> token), the ticket secret, and
    the port (None before a server bound one) and votes per item its last server used."""

    operator: str = field(default_factory=_token)
    shared: str = field(default_factory=_token)
    raters: dict[str, str] = field(default_factory=dict)
    secret: str = field(default_factory=lambda: secrets.token_hex(32))
    port: int | None = None
    votes_per_item: int | None = None
    verdict: str = "suspected"

    def visitor(self, token: str | None) -> Visitor | None:
        """Whose ``token`` is, compared in constant time with every token; None for nobody's.
        The shared link works only while the review names no rater."""
        if not token:
            return None
        found: Visitor | None = None
        given = token.encode()
        if hmac.compare_digest(given, self.operator.encode()):
            found = Visitor(operator=True, name=None, token=self.operator)
        if hmac.compare_digest(given, self.shared.encode()) and not self.raters:
            found = Visitor(operator=False, name=None, token=self.shared)
        for name, own in self.raters.items():
            if hmac.compare_digest(given, own.encode()):
                found = Visitor(operator=False, name=name, token=own)
        return found

    def with_raters(self, names: Iterable[str]) -> Access:
        """This access with a link for each of ``names`` it lacks (existing links are kept)."""
        raters = dict(self.raters)
        for name in names:
            raters.setdefault(name, _token())
        return replace(self, raters=raters)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": _VERSION,
            "operator": self.operator,
            "shared": self.shared,
            "raters": dict(sorted(self.raters.items())),
            "secret": self.secret,
            "port": self.port,
            "votes_per_item": self.votes_per_item,
            "verdict": self.verdict,
        }


def load_access(path: Path) -> Access | None:
    """The stored access of a review, or None when it has none yet; a file that is not one
    (damaged, or edited by hand) is refused, naming it."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StorageError(
            f"cannot read the review's links {path}: {e.strerror or e}", path=str(path)
        ) from e
    hint = "; delete the file to issue new links (open pages then need them)"
    data = loads(raw, what=f"the review's links {path}", error=StorageError, max_bytes=1 << 20,
                 hint=hint)  # fmt: skip
    try:
        if data.get("version") != _VERSION:
            raise TypeError("unknown version")
        raters = {rater_name(k): str(v) for k, v in data["raters"].items()}
        port, votes = data.get("port"), data.get("votes_per_item")
        return Access(
            operator=_checked_token(data["operator"]),
            shared=_checked_token(data["shared"]),
            raters={name: _checked_token(token) for name, token in raters.items()},
            secret=str(bytes.fromhex(data["secret"]).hex()),
            port=None if port is None else int(port),
            votes_per_item=None if votes is None else int(votes),
            verdict=str(data.get("verdict", "suspected")),
        )
    except (AttributeError, KeyError, TypeError, ValueError, InvalidInputError) as e:
        raise StorageError(
            f"the review's links {path} are damaged ({e}); delete the file to issue new links",
            path=str(path),
        ) from e


def _checked_token(value: object) -> str:
    if not isinstance(value, str) or len(value) < 16:
        raise TypeError(f"not a token: {value!r}")
    return value


def save_access(path: Path, access: Access) -> None:
    """Store ``access`` atomically (temporary file, fsync, rename, folder fsync), mode 0600."""
    data = (json.dumps(access.to_json(), indent=2) + "\n").encode()
    try:
        write_durable(path, data, mode=0o600)
    except OSError as e:
        raise StorageError(
            f"cannot store the review's links in {path}: {e.strerror or e}", path=str(path)
        ) from e

"""The review page and its JSON API: a Starlette app over one ``ReviewSession``.

Every request needs the access token: ``?token=`` on the first load (which sets a cookie and
redirects to the same page without it, so the token leaves the address bar and the history),
then the cookie. Every state-changing request is a ``POST`` of JSON that must also carry the
token in the ``X-Dsreg-Token`` header (which a cross-site form or script cannot set), and an
``Origin`` or ``Sec-Fetch-Site`` header, when the browser sends one, must say the request came
from this page's origin. The cookie is ``HttpOnly`` and ``SameSite=Strict``.

A token is a visitor's (``access.py``): the operator's, the shared raters' (who name
themselves) or a named rater's (whose requests are that rater's, whatever their body says).
Only the operator finishes the review; a rater who tries gets 403. A vote or skip carries the
ticket of the item it answers (``queue.py``); one that does not fit gets 409 and is not saved.

Payload bytes are served by row number only (a row of the queue), read from the store
re-hashed, or, for a row without one, from the ``--media`` folder by the row's example id
(``media.py``: never a path from the request, never outside the folder), with a content type
sniffed from their magic bytes (``media.sniff``: an image or audio type, else text or opaque
bytes, never HTML) and ``X-Content-Type-Options: nosniff``. Every response carries a
Content-Security-Policy that allows this origin's script, style, images and media and nothing
else, but a ``--media-url`` template's origin for images and media and, by its hash, the error
page's inline stylesheet (a visitor without the token may not load ``/static``). Data
reaches the page as JSON and is put in with ``textContent``; the page template is rendered
with Jinja2's autoescape. Errors are JSON ``{"error": message}`` with the status ``STATUSES``
gives the error's kind (a 4xx for a request refused; 500 only for the server's own failures:
a damaged object, a disk that fails), never a traceback; a browser's navigation to a page (a
``GET`` that accepts HTML) gets the same message as a page of its own (``error.html``).

A request body is read only up to 16 KiB: a larger ``Content-Length`` is refused (413, and the
connection closed) before a byte of it is read, and a chunked body or one without a length is
read in the pieces the server hands over and refused as soon as it passes the limit. Its JSON
is nested at most ``REQUEST_DEPTH`` (32) deep (``request_json``). A redirect's ``Location`` is
always a path on this server (``same_origin_location``): one leading ``/`` and nothing a
browser could read as a scheme or a host.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import re
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Final, NamedTuple
from urllib.parse import quote, unquote, urlencode, urlsplit

import jinja2
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from dsreg._util.jsonread import loads
from dsreg.errors import (
    AmbiguousDigestError,
    DsregError,
    InvalidInputError,
    NotFoundError,
    ReviewConflictError,
    TagExistsError,
    VotesError,
)
from dsreg.objects.digest import short
from dsreg.reviewing.access import Visitor
from dsreg.reviewing.agreement import coordinator_state
from dsreg.reviewing.media import MediaRefusedError, media_origin
from dsreg.reviewing.pagejson import answered, item_json
from dsreg.reviewing.queue import ANSWERS, Item, check_reviewer
from dsreg.reviewing.session import ReviewSession

__all__ = [
    "REQUEST_DEPTH",
    "STATUSES",
    "TOKEN_HEADER",
    "make_app",
    "request_json",
    "same_origin_location",
    "same_origin_path",
    "status_of",
]

TOKEN_HEADER: Final = "X-Dsreg-Token"
_MAX_BODY: Final = 16 * 1024
#: The deepest a request body's JSON may nest (docs/review.md, "Security"): a request of the
#: page nests two levels, so this leaves room and is far below what the parser could take.
REQUEST_DEPTH: Final = 32
#: The status of each kind of error, the first that fits (docs/review.md, "Security"): a
#: request refused is a 4xx, and only what no request can cause is a 500.
STATUSES: Final[tuple[tuple[type[DsregError], int], ...]] = (
    (MediaRefusedError, 403),  # a media file outside the folder, or not a regular file
    (ReviewConflictError, 409),  # an answer for an item the rater no longer holds
    (TagExistsError, 409),  # finishing into a tag that exists (without force)
    (NotFoundError, 404),  # a media or corpus file, a match or an object that is not there
    (AmbiguousDigestError, 400),  # a digest prefix naming several objects: bad input
    (InvalidInputError, 400),  # a request, a vote or a threshold that is not valid
)
# A Location that is already a path of this server: one "/", then unreserved characters,
# slashes and percent escapes; a query of the same and "+=&".
_OWN_LOCATION: Final = re.compile(r"/(?![/\\])[A-Za-z0-9\-._~%/]*(?:\?[A-Za-z0-9\-._~%+=&]*)?")
_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self' {style}; img-src 'self' blob:{media}; "
    "media-src 'self' blob:{media}; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
_HEADERS: Final = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
_ASSETS: Final = {
    "review.js": "text/javascript",
    "review.css": "text/css",
    "pairs.js": "text/javascript",
    "pairs.css": "text/css",
    "coordinator.js": "text/javascript",
    "coordinator.css": "text/css",
}
_OPERATOR_ONLY: Final = (
    "{what} is the operator's: open the operator's link ('dsreg review' printed it){how}"
)


def _style_source(style: str) -> str:
    """The CSP source that lets exactly this inline ``<style>`` element apply: its hash."""
    digest = base64.b64encode(hashlib.sha256(style.encode("utf-8")).digest()).decode("ascii")
    return f"'sha256-{digest}'"


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def request_json(raw: bytes) -> Any:
    """The JSON of a request body through the one bounded reader, refused
    (``InvalidInputError``) when it is not UTF-8, nests deeper than the reader allows or does
    not parse: no body can make the parser recurse too deep."""
    return loads(
        raw,
        what="request body",
        error=InvalidInputError,
        max_bytes=_MAX_BODY,
        max_depth=REQUEST_DEPTH,
    )


def same_origin_path(path: str) -> str:
    """A request's path (percent-decoded, as the server hands it over) as a redirect's path on
    this server: leading slashes and backslashes become one ``/``, and every other character
    but letters, digits, ``-._~`` and ``/`` is percent-encoded, so nothing in it (``//``,
    ``\\``, a scheme's ``:``, a tab a browser drops, ``%2F`` decoded to ``/``) can name a host."""
    return "/" + quote(path.lstrip("/\\"), safe="/")


def same_origin_location(location: str) -> str:
    """``location`` as a path on this server: kept when it is one already (``_OWN_LOCATION``),
    else its path made one with ``same_origin_path`` and its query kept, its scheme, host and
    fragment dropped."""
    if _OWN_LOCATION.fullmatch(location):
        return location
    try:
        parts = urlsplit(location)
    except ValueError:
        return "/"
    query = quote(parts.query, safe="=&+%")
    return same_origin_path(unquote(parts.path)) + (f"?{query}" if query else "")


async def _read_body(request: Request) -> bytes:
    """A request's body, never more than ``_MAX_BODY`` bytes of it read: a larger
    ``Content-Length`` is refused before reading, any other body as soon as it passes the
    limit. A refusal closes the connection, so the rest of the body is never read either."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > _MAX_BODY:
        raise _too_large(f"{int(declared)} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async with contextlib.aclosing(request.stream()) as stream:
            async for chunk in stream:
                size += len(chunk)
                if size > _MAX_BODY:
                    raise _too_large(f"more than {_MAX_BODY} bytes")
                chunks.append(chunk)
    except ClientDisconnect:
        raise InvalidInputError("the client went away before its request body came") from None
    return b"".join(chunks)


def _too_large(size: str) -> HTTPException:
    return HTTPException(
        413,
        f"request body of {size} is too large: at most {_MAX_BODY} bytes",
        headers={"Connection": "close"},
    )


def status_of(error: DsregError) -> int:
    """The status of ``error`` by ``STATUSES``; 500 for any other (the server's own failure)."""
    return next((status for kind, status in STATUSES if isinstance(error, kind)), 500)


class _Guard(BaseHTTPMiddleware):
    """The token, the cross-site checks and the headers every response carries; the visitor
    a request's token names is ``request.state.visitor``."""

    def __init__(
        self,
        app: Any,
        *,
        session: ReviewSession,
        cookie: str,
        page: Callable[[Request, int, str], Response],
        inline_style: str,
    ) -> None:
        super().__init__(app)
        self.session = session
        self.cookie = cookie
        self.page = page
        url = session.media.url
        self.headers = {
            "Content-Security-Policy": _CSP.format(
                style=_style_source(inline_style),
                media="" if url is None else " " + media_origin(url),
            ),
            **_HEADERS,
        }

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await self._checked(request, call_next)
        for name, value in self.headers.items():
            response.headers.setdefault(name, value)
        location = response.headers.get("location")
        if location is not None:
            # Every redirect stays on this server, whoever made it (the router's own, for a
            # path with or without a trailing slash, names the Host header's host).
            response.headers["location"] = same_origin_location(location)
        return response

    async def _checked(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        query = request.query_params
        access = self.session.access
        given = access.visitor(query.get("token")) if request.method == "GET" else None
        if given is not None:
            # Trade the token in the address for a cookie, and drop it from the address.
            rest = urlencode([(k, v) for k, v in query.multi_items() if k != "token"])
            path = same_origin_path(request.scope["path"])
            response = RedirectResponse(path + (f"?{rest}" if rest else ""), 303)
            response.set_cookie(
                self.cookie, given.token, httponly=True, samesite="strict", path="/"
            )
            return response
        visitor = access.visitor(request.cookies.get(self.cookie))
        if visitor is None:
            return self.page(
                request,
                403,
                "a valid access token is required: open the link that 'dsreg review' printed "
                "for you (it carries ?token=...)",
            )
        request.state.visitor = visitor
        if request.method not in ("GET", "HEAD"):
            header = request.headers.get(TOKEN_HEADER) or ""
            if not hmac.compare_digest(header.encode(), visitor.token.encode()):
                return _error(403, f"a state-changing request needs the {TOKEN_HEADER} header")
            origin = request.headers.get("origin")
            own = f"{request.url.scheme}://{request.headers.get('host', '')}"
            if origin is not None and origin != own:
                return _error(403, f"cross-origin request from {origin!r} refused")
            site = request.headers.get("sec-fetch-site")
            if site is not None and site not in ("same-origin", "none"):
                return _error(403, f"cross-site request ({site}) refused")
        return await call_next(request)


def make_app(session: ReviewSession, *, cookie: str) -> Starlette:
    """The review app of ``session``, whose ``access`` holds the tokens; ``cookie`` is the
    token's cookie's name (one per port: cookies do not tell ports apart)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("dsreg.reviewing", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    assets = {
        name: _Asset(resources.files("dsreg.reviewing").joinpath("static", name).read_bytes(), kind)
        for name, kind in _ASSETS.items()
    }
    endpoints = _Endpoints(
        session,
        env.get_template("review.html"),
        env.get_template("error.html"),
        assets,
        env.get_template("coordinator.html"),
    )
    return Starlette(
        routes=_routes(endpoints),
        middleware=[
            Middleware(
                _Guard,
                session=session,
                cookie=cookie,
                page=endpoints.error_page,
                inline_style=endpoints.error_style,
            )
        ],
        exception_handlers={DsregError: _dsreg_error, HTTPException: endpoints.http_error},
    )


def _routes(e: _Endpoints) -> list[Route]:
    """The pages and files (``GET``) and the JSON API (``POST``), each path to its endpoint."""
    pages: dict[str, Callable[[Request], Any]] = {
        "/": e.index,
        "/static/{name}": e.asset,
        "/payload/{row:int}": e.payload,
        "/payload/{row:int}/match": e.match,
        "/coordinator": e.coordinator,
        "/api/coordinator": e.coordination,
    }
    api: dict[str, Callable[[Request], Any]] = {
        "/api/next": e.next_item,
        "/api/vote": e.answer,
        "/api/skip": e.answer,
        "/api/undo": e.undo,
        "/api/finish": e.finish,
        "/api/progress": e.progress,
        "/api/order": e.order,
    }
    return [Route(path, f, methods=["GET"]) for path, f in pages.items()] + [
        Route(path, f, methods=["POST"]) for path, f in api.items()
    ]


class _Asset(NamedTuple):
    """A file the page loads: its bytes and content type."""

    data: bytes
    media_type: str


def _visitor(request: Request) -> Visitor:
    visitor = request.state.visitor
    assert isinstance(visitor, Visitor)
    return visitor


async def _asked(request: Request) -> tuple[dict[str, Any], str]:
    """The request's JSON object and who it is from (``_reviewer``)."""
    data = await _body(request)
    return data, _reviewer(request, data)


def _reviewer(request: Request, data: dict[str, Any]) -> str:
    """Who a request is from: a named rater's link says; else the name the page sends."""
    name = _visitor(request).name
    return name if name is not None else check_reviewer(data.get("reviewer"))


@dataclass(frozen=True, slots=True)
class _Endpoints:
    """The app's endpoints over one session: the page, its files, a payload, and the JSON API.
    One lock makes each change to the queue and the item it answers with one step."""

    session: ReviewSession
    page: jinja2.Template
    error: jinja2.Template
    assets: dict[str, _Asset]
    coordinator_page: jinja2.Template
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _state(
        self, request: Request, reviewer: str, item: Item | None, **extra: Any
    ) -> JSONResponse:
        operator = _visitor(request).operator
        return JSONResponse(
            {
                "reviewer": reviewer,
                "item": item_json(self.session, item, reviewer, operator=operator),
                "progress": self.session.queue.progress(reviewer).to_dict(),
                **extra,
            }
        )

    async def index(self, request: Request) -> Response:
        session = self.session
        visitor = _visitor(request)
        html = self.page.render(
            token=visitor.token,
            rater=visitor.name or "",
            operator=visitor.operator,
            dataset=session.dataset,
            spec=session.source.spec,
            overlay=short(session.source.digest),
            verdict="duplicate, contaminated" if session.pairs else session.verdict,
            votes_per_item=session.queue.votes_per_item,
            answers=ANSWERS,
            pairs=session.pairs,
            class_pairs=[
                (f"{g},{s}", f"{session.classes[g]} → {session.classes[s]}", n)
                for g, s, n in session.class_pairs()
            ]
            if visitor.operator and not session.pairs
            else [],
        )
        return Response(html, media_type="text/html; charset=utf-8")

    async def asset(self, request: Request) -> Response:
        found = self.assets.get(request.path_params["name"])
        if found is None:
            return _error(404, "no such file")
        return Response(found.data, media_type=found.media_type)

    def payload(self, request: Request) -> Response:
        data, kind = self.session.payload(request.path_params["row"])
        return Response(data, media_type=kind)

    def match(self, request: Request) -> Response:
        data, kind = self.session.match_payload(request.path_params["row"])
        return Response(data, media_type=kind)

    async def coordinator(self, request: Request) -> Response:
        if not _visitor(request).operator:
            return self.error_page(
                request, 403, _OPERATOR_ONLY.format(what="The coordinator's view", how="")
            )
        session = self.session
        html = self.coordinator_page.render(
            token=_visitor(request).token,
            dataset=session.dataset,
            spec=session.source.spec,
            overlay=short(session.source.digest),
            pairs=session.pairs,
        )
        return Response(html, media_type="text/html; charset=utf-8")

    def coordination(self, request: Request) -> Response:
        """The coordinator view's data (``agreement.py``), from the votes log as it is now."""
        if not _visitor(request).operator:
            return _error(403, _OPERATOR_ONLY.format(what="The coordinator's view", how=""))
        queue = self.session.queue
        with self.lock:
            records = list(queue.log.records)
        state = coordinator_state(
            records,
            queue.items,
            answers=queue.answers,
            votes_per_item=queue.votes_per_item,
            raters=self.session.access.raters,
        )
        return JSONResponse(state)

    async def next_item(self, request: Request) -> Response:
        data, reviewer = await _asked(request)
        queue = self.session.queue
        row = data.get("row")
        with self.lock:
            if row is None:
                return self._state(request, reviewer, queue.next_item(reviewer))
            if not _visitor(request).operator:
                return _error(403, _OPERATOR_ONLY.format(what="Opening an item", how=""))
            item = queue.open_item(reviewer, row)  # a row that is no item is refused here
            none = (dict.fromkeys(queue.answers, 0), ())
            counts, names = queue.tallies().get(item.row, none)
            opened = {"row": item.row, "counts": counts, "reviewers": list(names)}
            return self._state(request, reviewer, item, opened=opened)

    async def answer(self, request: Request) -> Response:
        data, reviewer = await _asked(request)
        queue = self.session.queue
        ticket = data.get("ticket")
        with self.lock:
            if request.url.path.endswith("/skip"):
                queue.skip(reviewer, data.get("row"), ticket=ticket)
                saved = {"row": data.get("row"), "answer": None}
            else:
                record = queue.vote(
                    reviewer,
                    data.get("row"),
                    data.get("answer"),
                    ticket=ticket,
                    comment=data.get("comment"),
                )
                saved = answered(record)
            return self._state(request, reviewer, queue.next_item(reviewer), saved=saved)

    async def undo(self, request: Request) -> Response:
        _, reviewer = await _asked(request)
        with self.lock:
            undone = self.session.queue.undo_action(reviewer)
        return self._state(request, reviewer, undone.item, undone=answered(undone.record))

    async def progress(self, request: Request) -> Response:
        """The progress line now (the page polls it, so it counts everyone's votes live)."""
        _, reviewer = await _asked(request)
        with self.lock:
            progress = self.session.queue.progress(reviewer).to_dict()
        return JSONResponse({"reviewer": reviewer, "progress": progress})

    async def order(self, request: Request) -> Response:
        """The operator's own order of the queue (``ReviewSession.order``), and the item it
        gives them next."""
        if not _visitor(request).operator:
            return _error(403, "sorting and filtering the queue is the operator's")
        data, reviewer = await _asked(request)
        pair = data.get("pair")
        rows = self.session.order(data.get("sort", "worst"), pair)
        queue = self.session.queue
        with self.lock:
            queue.set_order(reviewer, rows)
            return self._state(request, reviewer, queue.next_item(reviewer))

    @property
    def error_style(self) -> str:
        """The error page's stylesheet, put in the page itself: a visitor without a token (the
        403 page's) may not load ``/static``, and the page must look like the review's."""
        return self.assets["review.css"].data.decode("utf-8")

    def error_page(self, request: Request, status: int, message: str) -> Response:
        """An error as the page a browser shows (a navigation, which asks for HTML), else as
        JSON ``{"error": message}``."""
        accept = request.headers.get("accept", "")
        if request.method != "GET" or "text/html" not in accept:
            return _error(status, message)
        html = self.error.render(status=status, message=message, style=Markup(self.error_style))
        return Response(html, status_code=status, media_type="text/html; charset=utf-8")

    async def http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        response = self.error_page(request, exc.status_code, str(exc.detail))
        response.headers.update(exc.headers or {})
        return response

    async def finish(self, request: Request) -> Response:
        if not _visitor(request).operator:
            how = ", or run 'dsreg review SPEC --finish'"
            return _error(403, _OPERATOR_ONLY.format(what="Finishing the review", how=how))
        data = await _body(request)
        threshold = data.get("threshold", 3)
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise VotesError(f"threshold must be a whole number, at least 1; got {threshold!r}")
        tag = data.get("tag") or None
        view = data.get("view") or None
        if not isinstance(tag, str | None) or not isinstance(view, str | None):
            raise InvalidInputError("tag and view must be strings")
        with self.lock:
            result = self.session.finish(threshold=threshold, tag=tag, view=view)
        tagged = result.tagged
        return JSONResponse(
            {
                "overlay": result.digest,
                "summary": result.summary,
                "tagged": None if tagged is None else f"{tagged.dataset}@{tagged.tag}",
                "set_aside": [span.to_dict() for span in result.set_aside],
                "short": result.short,
                "votes_per_item": result.votes_per_item,
            }
        )


async def _body(request: Request) -> dict[str, Any]:
    """The request's JSON object."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise InvalidInputError("send the request body as application/json")
    data = request_json(await _read_body(request))
    if not isinstance(data, dict):
        raise InvalidInputError("request body must be a JSON object")
    return data


async def _dsreg_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DsregError)
    return _error(status_of(exc), str(exc))

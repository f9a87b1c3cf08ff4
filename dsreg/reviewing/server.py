"""``ReviewServer``: the review app served by uvicorn on a background thread.

What ``dsreg.review`` returns: ``start()`` binds (loopback unless told otherwise; by default
the port the review's last server had, so open pages and their links keep working; port 0
picks a free one) and serves, ``url`` is the operator's address (it carries the operator's
token), ``links`` every address to hand out, ``stop()`` stops serving and releases the votes
log. A context manager starts and stops it.
uvicorn is given no logging configuration and no access log: the library prints nothing.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlencode

from dsreg._util.lazy import lazy_imports
from dsreg.errors import InvalidInputError, StorageError
from dsreg.reviewing.logbytes import SetAside
from dsreg.reviewing.queue import ReviewProgress
from dsreg.reviewing.session import ReviewSession

# The web stack (the review extra): imported when the page is first built or served, so that
# ``dsreg.ReviewServer`` imports without it.
with lazy_imports():
    import uvicorn

    from dsreg.reviewing import app as review_app

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["ReviewServer"]

_START_SECONDS: Final = 30.0


class ReviewServer:
    """A review session served over HTTP.

    Attributes
    ----------
    session : ReviewSession
        The queue, its votes log and its finishing.
    host, port : str, int
        Where it listens (``port`` is the bound one once started; given None, the review's
        last server's port, else a free one).
    token : str
        The operator's access token (the raters' are in ``session.access``).
    """

    def __init__(
        self,
        session: ReviewSession,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        reviewer: str | None = None,
    ) -> None:
        if port is not None and not 0 <= port <= 65535:
            raise InvalidInputError(f"port {port} is not between 0 and 65535")
        self.session = session
        self.host = host
        self.port = port if port is not None else session.access.port or 0
        self._kept_port = port is None and bool(session.access.port)
        self.reviewer = reviewer
        self.token = session.access.operator
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._app: Starlette | None = None

    def asgi(self) -> Starlette:
        """The review app itself (an ASGI app), to mount elsewhere or to test with Starlette's
        ``TestClient``; ``start`` serves this same app."""
        if self._app is None:
            self._app = review_app.make_app(self.session, cookie=f"dsreg-review-{self.port}")
        return self._app

    def _link(self, token: str, reviewer: str | None = None) -> str:
        host = self.host
        with contextlib.suppress(ValueError):
            if ipaddress.ip_address(host).version == 6:
                host = f"[{host}]"
        query = {"token": token}
        if reviewer:
            query["reviewer"] = reviewer
        return f"http://{host}:{self.port}/?{urlencode(query)}"

    @property
    def url(self) -> str:
        """The operator's page address with its token (and ``reviewer`` when one was given)."""
        return self._link(self.token, self.reviewer)

    @property
    def links(self) -> dict[str, Any]:
        """Every link to hand out: ``operator`` (``url``), and ``raters``, one per named rater
        (name -> link), or, when the review names none, ``shared``, the link where raters name
        themselves."""
        access = self.session.access
        if access.raters:
            raters = {name: self._link(token) for name, token in sorted(access.raters.items())}
            return {"operator": self.url, "raters": raters}
        return {"operator": self.url, "shared": self._link(access.shared)}

    def progress(self, reviewer: str | None = None) -> ReviewProgress:
        """The queue's progress line: votes by ``reviewer`` and by everyone, items complete and
        remaining."""
        return self.session.queue.progress(reviewer)

    @property
    def set_aside(self) -> tuple[SetAside, ...]:
        """The damaged spans of the queue's votes log, each moved to a file of its own (when
        the log was opened, or before): what they held is not counted. Empty when the log was
        never damaged."""
        return self.session.log.set_aside

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> ReviewServer:
        """Bind and serve on a background thread; returns once requests are answered."""
        if self._thread is not None:
            return self
        sock: socket.socket | None = None
        try:
            info = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)[0]
            sock = socket.socket(info[0], socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Accepted sockets inherit it: a response written in parts (headers, body) must
            # not wait for the client's delayed ACK (40 ms a request on Linux loopback).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind(info[4])
        except OSError as e:
            if sock is not None:
                sock.close()  # the port was taken: this socket serves nothing
            kept = (
                " (the review's port: its open pages and links name it; --port 0 picks a free "
                "port and new links)"
                if self._kept_port
                else ""
            )
            raise StorageError(
                f"cannot listen on {self.host}:{self.port}{kept}: {e.strerror or e}; choose "
                "another --host or --port (0 picks a free port)"
            ) from e
        self.port = sock.getsockname()[1]
        if self.session.access.port != self.port:
            self.session.store_access(port=self.port)
        config = uvicorn.Config(
            self.asgi(), log_config=None, access_log=False, log_level="warning", lifespan="off"
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="dsreg-review", daemon=True
        )
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + _START_SECONDS
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise StorageError(f"the review server did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        return self

    def wait(self, timeout: float | None = None) -> None:
        """Block until the server stops (or ``timeout`` seconds pass)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def stop(self) -> None:
        """Stop serving and release the votes log (every answered vote is on disk already)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._server = self._thread = None
        self.session.close()

    def __enter__(self) -> ReviewServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "serving" if self.running else "stopped"
        return f"<dsreg.ReviewServer {self.session.dataset} {state} {self.host}:{self.port}>"

"""The review of flagged rows: ``review`` (the server), ``review_export``, ``review_finish``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

from dsreg._util.fs import replacing
from dsreg._util.inputs import INPUT_BYTES
from dsreg._util.jsonread import loads
from dsreg._util.lazy import lazy_module
from dsreg.api.common import command_of, find_registry
from dsreg.api.options import Arg, Opt, PathArg, RegistryOpt
from dsreg.errors import InputPathError, VotesError

# The review reads its queue with pyarrow and serves it with Starlette and uvicorn: imported
# when first used.
if TYPE_CHECKING:
    from dsreg.reviewing import queue as review_queue
    from dsreg.reviewing import server as review_server
    from dsreg.reviewing import session as review_session
    from dsreg.reviewing.server import ReviewServer
    from dsreg.reviewing.session import ReviewExport, ReviewFinish
else:
    review_queue = lazy_module("dsreg.reviewing.queue")
    review_server = lazy_module("dsreg.reviewing.server")
    review_session = lazy_module("dsreg.reviewing.session")


def review(
    spec: Annotated[str, Arg("The revision whose flagged rows are reviewed.")],
    *,
    overlay: Annotated[
        str | None,
        Opt(help="The overlay whose rows are reviewed (default: the revision's last)."),
    ] = None,
    verdict: Annotated[str, Opt(help="Review the rows with this verdict.")] = "suspected",
    reviewer: Annotated[
        str | None, Opt(help="Open the page as this reviewer (put in the URL).")
    ] = None,
    votes_per_item: Annotated[int, Opt(help="An item leaves the queue with this many votes.")] = 5,
    host: Annotated[str, Opt(help="Address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, Opt(help="Port to listen on (0: a free one).")] = 0,
    lease_seconds: float = 300.0,
    registry: RegistryOpt = None,
) -> ReviewServer:
    """A review server for the rows that ``spec``'s last overlay (or ``overlay``, a digest or
    prefix) flags with ``verdict``, worst score first. Not started: ``server.start()`` (or
    ``with dsreg.review(...) as server:``) serves it, ``server.url`` is the page to open (with
    its access token), ``server.stop()`` stops it.

    Each item is shown until ``votes_per_item`` reviewers answered it; an item given to a
    reviewer is kept from others for ``lease_seconds``. ``reviewer`` is put in the URL, so the
    page opens as that reviewer. Every answer is fsynced to the queue's votes log
    (``<registry>/review/<overlay hex>/votes.log``) before it is acknowledged; a new server of
    the same queue resumes from it. Damaged spans of the log (a record torn by a crash, a
    flipped byte) are moved to files of their own beside it and listed in
    ``server.set_aside``; every record whose check holds is kept, those after them too.
    """
    if reviewer is not None:
        reviewer = review_queue.check_reviewer(reviewer)
    session = review_session.ReviewSession(
        find_registry(registry),
        spec,
        overlay=overlay,
        verdict=verdict,
        votes_per_item=votes_per_item,
        lease_seconds=lease_seconds,
    )
    try:
        return review_server.ReviewServer(session, host=host, port=port, reviewer=reviewer)
    except BaseException:
        session.close()
        raise


def review_export(
    spec: str,
    path: PathArg,
    *,
    overlay: str | None = None,
    registry: RegistryOpt = None,
) -> ReviewExport:
    """Write the votes cast so far about ``spec``'s review queue to ``path`` in the
    label-errors (MTurk) JSON format, which ``import_votes`` reads; returns the number of
    records written, a ``ReviewExport`` (an ``int``) whose ``set_aside`` lists the damaged
    spans of the votes log, whose records it could not count (empty when the log is whole).
    Reads the votes log without disturbing a running server."""
    data, set_aside = review_session.export_votes(find_registry(registry), spec, overlay=overlay)
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with replacing(path) as f:
            f.write(data)
    except OSError as e:
        raise InputPathError(
            f"cannot write {os.fspath(path)}: {e.strerror or e}; check the folder",
            path=os.fspath(path),
        ) from e
    records = len(loads(data, what="the votes export", error=VotesError, max_bytes=INPUT_BYTES))
    return review_session.ReviewExport(records, path=os.fspath(path), set_aside=set_aside)


def review_finish(
    spec: str,
    *,
    overlay: str | None = None,
    threshold: int = 3,
    tag: str | None = None,
    view: str | None = None,
    force: bool = False,
    command: str | None = None,
    registry: RegistryOpt = None,
) -> ReviewFinish:
    """Store the votes about ``spec``'s review queue as a ``validated`` overlay, exactly as
    ``import_votes`` of the file ``review_export`` writes (same verdict rule, same digest);
    ``tag`` also tags ``<dataset>@<tag>``: ``spec`` plus the overlay, in ``view`` (default
    cleaned). The result, a ``ReviewFinish`` (an ``OverlayResult``), lists in ``set_aside`` the
    damaged spans of the votes log, whose records the overlay could not count."""
    return review_session.finish_review(
        find_registry(registry),
        spec,
        overlay=overlay,
        threshold=threshold,
        tag=tag,
        view=view,
        force=force,
        command=command_of(command, "review_finish", spec),
    )

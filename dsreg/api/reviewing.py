"""The review of flagged rows: ``review`` (the server), ``review_export``, ``review_finish``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from dsreg.api.common import PathArg, RegistryArg, command_of, find_registry

if TYPE_CHECKING:
    from dsreg.reviewing.server import ReviewServer
    from dsreg.reviewing.session import ReviewExport, ReviewFinish


def review(
    spec: str,
    *,
    overlay: str | None = None,
    verdict: str = "suspected",
    reviewer: str | None = None,
    votes_per_item: int = 5,
    host: str = "127.0.0.1",
    port: int = 0,
    lease_seconds: float = 300.0,
    registry: RegistryArg = None,
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
    from dsreg.reviewing.queue import check_reviewer
    from dsreg.reviewing.server import ReviewServer
    from dsreg.reviewing.session import ReviewSession

    if reviewer is not None:
        reviewer = check_reviewer(reviewer)
    session = ReviewSession(
        find_registry(registry),
        spec,
        overlay=overlay,
        verdict=verdict,
        votes_per_item=votes_per_item,
        lease_seconds=lease_seconds,
    )
    try:
        return ReviewServer(session, host=host, port=port, reviewer=reviewer)
    except BaseException:
        session.close()
        raise


def review_export(
    spec: str,
    path: PathArg,
    *,
    overlay: str | None = None,
    registry: RegistryArg = None,
) -> ReviewExport:
    """Write the votes cast so far about ``spec``'s review queue to ``path`` in the
    label-errors (MTurk) JSON format, which ``import_votes`` reads; returns the number of
    records written, a ``ReviewExport`` (an ``int``) whose ``set_aside`` lists the damaged
    spans of the votes log, whose records it could not count (empty when the log is whole).
    Reads the votes log without disturbing a running server."""
    from dsreg._util.fs import replacing
    from dsreg._util.inputs import INPUT_BYTES
    from dsreg._util.jsonread import loads
    from dsreg.errors import InputPathError, VotesError
    from dsreg.reviewing.session import ReviewExport, export_votes

    data, set_aside = export_votes(find_registry(registry), spec, overlay=overlay)
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
    return ReviewExport(records, path=os.fspath(path), set_aside=set_aside)


def review_finish(
    spec: str,
    *,
    overlay: str | None = None,
    threshold: int = 3,
    tag: str | None = None,
    view: str | None = None,
    force: bool = False,
    command: str | None = None,
    registry: RegistryArg = None,
) -> ReviewFinish:
    """Store the votes about ``spec``'s review queue as a ``validated`` overlay, exactly as
    ``import_votes`` of the file ``review_export`` writes (same verdict rule, same digest);
    ``tag`` also tags ``<dataset>@<tag>``: ``spec`` plus the overlay, in ``view`` (default
    cleaned). The result, a ``ReviewFinish`` (an ``OverlayResult``), lists in ``set_aside`` the
    damaged spans of the votes log, whose records the overlay could not count."""
    from dsreg.reviewing.session import finish_review

    return finish_review(
        find_registry(registry),
        spec,
        overlay=overlay,
        threshold=threshold,
        tag=tag,
        view=view,
        force=force,
        command=command if command is not None else command_of("review_finish", spec),
    )

"""The review of flagged rows: ``review`` (the server), ``review_export``, ``review_finish``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeAlias

from dsreg._util.extras import require
from dsreg._util.fs import replacing
from dsreg._util.inputs import INPUT_BYTES, read_input
from dsreg._util.jsonread import loads
from dsreg._util.lazy import lazy_imports
from dsreg.api.common import command_of, local_reader, overlay_credit
from dsreg.api.options import Arg, Opt, PathArg, RegistryOpt
from dsreg.errors import InputPathError, InvalidInputError, VotesError

# The review reads its queue with pyarrow and serves it with Starlette and uvicorn: imported
# when first used.
with lazy_imports():
    from dsreg.ops import overlay as overlay_ops
    from dsreg.reviewing import access as review_access
    from dsreg.reviewing import media as review_media
    from dsreg.reviewing import queue as review_queue
    from dsreg.reviewing import server as review_server
    from dsreg.reviewing import session as review_session

if TYPE_CHECKING:
    from dsreg.reviewing.server import ReviewServer
    from dsreg.reviewing.session import ReviewExport, ReviewFinish


RatersOpt: TypeAlias = Annotated[
    str | None,
    Opt(
        help="Give each of these raters a link of their own: NAME,NAME,... or @FILE (one "
        "name a line); names ignore case. Without: one shared link, raters name themselves.",
        metavar="NAMES",
    ),
]
# Where a label-only set's payloads are (``dsreg.reviewing.media``).
MediaOpt: TypeAlias = Annotated[
    PathArg | None,
    Opt(
        help="Show rows without a stored payload from this folder (read only): the file "
        "DIR/<example_id>, else DIR/<example_id>.<ext> (png, jpg, txt, wav, ...).",
        metavar="DIR",
        cli_type=Path,
    ),
]
MediaUrlOpt: TypeAlias = Annotated[
    str | None,
    Opt(
        help="Or let the page load them from this address, {example_id} replaced by the "
        "URL-quoted id (audio by the address's extension, else an image).",
        metavar="TEMPLATE",
    ),
]


QueueOverlayOpt: TypeAlias = Annotated[
    str | None, Opt(help="The overlay whose rows are reviewed (default: the revision's last).")
]
AuditOpt: TypeAlias = Annotated[
    bool,
    Opt(
        "--audit",
        help="Review the revision's last audit overlay: each finding beside its match, "
        "answered same or different.",
    ),
]
CorpusOpt: TypeAlias = Annotated[
    PathArg | None,
    Opt(
        help="With an audit of a corpus folder (--against DIR): that folder, whose files show "
        "the matches.",
        metavar="DIR",
        cli_type=Path,
    ),
]


def review(
    spec: Annotated[str, Arg("The revision whose flagged rows are reviewed.")],
    *,
    overlay: QueueOverlayOpt = None,
    audit: AuditOpt = False,
    corpus: CorpusOpt = None,
    verdict: Annotated[str, Opt(help="Review the rows with this verdict.")] = "suspected",
    reviewer: Annotated[
        str | None, Opt(help="Open the page as this reviewer (put in the URL).")
    ] = None,
    votes_per_item: Annotated[
        int | None,
        Opt(
            help="An item leaves the queue with this many votes; finishing with fewer leaves "
            "an item without agreement 'unreviewed' (default: the review's last, else 5).",
            min=1,
            show_default=False,
        ),
    ] = None,
    raters: RatersOpt = None,
    media: MediaOpt = None,
    media_url: MediaUrlOpt = None,
    host: Annotated[str, Opt(help="Address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[
        int | None,
        Opt(
            help="Port to listen on (default: the review's last, else a free one; 0: a free one).",
            show_default=False,
        ),
    ] = None,
    lease_seconds: float = 300.0,
    registry: RegistryOpt = None,
) -> ReviewServer:
    """A review server for the rows that ``spec``'s last overlay (or ``overlay``, a digest or
    prefix) flags with ``verdict``, worst score first. Not started: ``server.start()`` (or
    ``with dsreg.review(...) as server:``) serves it, ``server.url`` is the page to open (with
    its access token), ``server.stop()`` stops it.

    Each item is shown until ``votes_per_item`` reviewers answered it; an item given to a
    reviewer is kept from others for ``lease_seconds``. ``reviewer`` is put in the URL, so the
    page opens as that reviewer. ``server.links`` are the links to hand out: the operator's
    (``server.url``, the only one that can finish) and one per rater of ``raters``
    (``"NAME,NAME"`` or ``"@FILE"``, one name a line), or, when the review names no rater, one
    shared link where raters name themselves. Names are casefolded: ``Ann`` and ``ANN`` are one
    rater. The links, the port and the votes per item are stored with the review, so the next
    server of the same queue keeps them and open pages keep working. Every answer is fsynced
    to the queue's votes log (``<registry>/review/<overlay hex>/votes.log``) before it is
    acknowledged; a new server of the same queue resumes from it. Damaged spans of the log (a
    record torn by a crash, a flipped byte) are moved to files of their own beside it and
    listed in ``server.set_aside``; every record whose check holds is kept, those after them.

    A row without a stored payload is shown from ``media``, a folder read only and only inside
    itself, or from ``media_url``, a template of ``{example_id}`` (``docs/review.md``); a
    label-only queue with neither and no metadata column is refused. An audit overlay
    (``audit``: the revision's last) is reviewed as pairs, each finding beside its match (from
    ``corpus``, for an unregistered folder's), answered ``same`` or ``different``.
    """
    require("review", "dsreg review", python="dsreg.review")
    if reviewer is not None:
        reviewer = review_queue.check_reviewer(reviewer)
    names = rater_names(raters) if raters is not None else ()
    shown = review_media.Media.of(media, media_url, corpus)
    base = local_reader(registry).revision(spec)
    if audit:
        overlay = review_session.audit_queue(base, overlay)
    session = review_session.ReviewSession(
        base,
        overlay=overlay,
        verdict=verdict,
        votes_per_item=votes_per_item,
        lease_seconds=lease_seconds,
        raters=names,
        media=shown,
    )
    try:
        return review_server.ReviewServer(session, host=host, port=port, reviewer=reviewer)
    except BaseException:
        session.close()
        raise


def rater_names(raters: str) -> tuple[str, ...]:
    """The names of ``--raters``: ``NAME,NAME,...``, or ``@FILE`` with one name a line (blank
    lines skipped), each casefolded; a name given twice (in any case) is refused."""
    if raters.startswith("@"):
        data = read_input(
            raters[1:],
            what=f"raters file {raters[1:]!r}",
            max_bytes=1 << 20,
            error=InvalidInputError,
        )
        try:
            given = data.decode("utf-8-sig").splitlines()
        except UnicodeDecodeError:
            raise InvalidInputError(
                f"raters file {raters[1:]!r} is not UTF-8 text; write one name a line"
            ) from None
    else:
        given = raters.split(",")
    given = [name for name in given if name.strip()]
    if not given:
        raise InvalidInputError(f"--raters {raters!r} names no rater; give NAME,NAME or @FILE")
    names: dict[str, str] = {}
    for name in given:
        folded = review_access.rater_name(name)
        if folded in names:
            raise InvalidInputError(
                f"rater {name.strip()!r} is given twice (as {names[folded]!r} too): names ignore "
                "case; give each rater once"
            )
        names[folded] = name.strip()
    return tuple(names)


def review_export(
    spec: str,
    path: PathArg,
    *,
    overlay: str | None = None,
    audit: bool = False,
    corpus: PathArg | None = None,
    registry: RegistryOpt = None,
) -> ReviewExport:
    """Write the votes cast so far about ``spec``'s review queue to ``path`` in the
    label-errors (MTurk) JSON format, which ``import_votes`` reads; returns the number of
    records written, a ``ReviewExport`` (an ``int``) whose ``set_aside`` lists the damaged
    spans of the votes log, whose records it could not count (empty when the log is whole).
    Reads the votes log without disturbing a running server. ``corpus`` is refused as the
    server refuses it (``--corpus`` for a queue that is not an audit's, or that is no folder)."""
    base = local_reader(registry).revision(spec)
    review_session.refuse_corpus(base, overlay=overlay, audit=audit, corpus=corpus)
    exported = review_session.export_votes(base, overlay=overlay, audit=audit)
    data, set_aside = exported.data, exported.set_aside
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
    votes_per_item: int | None = None,
    citation: PathArg | None = None,
    credit: str | None = None,
    audit: bool = False,
    corpus: PathArg | None = None,
    command: str | None = None,
    registry: RegistryOpt = None,
) -> ReviewFinish:
    """Store the votes about ``spec``'s review queue as a ``validated`` overlay, exactly as
    ``import_votes`` of the file ``review_export`` writes (same verdict rule, same digest);
    ``tag`` also tags ``<dataset>@<tag>``: ``spec`` plus the overlay, in ``view`` (default
    cleaned). The result, a ``ReviewFinish`` (an ``OverlayResult``), lists in ``set_aside`` the
    damaged spans of the votes log, whose records the overlay could not count.

    An item with fewer than ``votes_per_item`` votes (default: the review's last server's,
    else 5) whose votes agree on no answer is ``unreviewed`` (no view removes it), not
    ``non_agreement``; ``short`` counts the queue's items with fewer votes (``unvoted`` those
    with none, which the overlay leaves out). ``citation`` (a BibTeX file) and ``credit``
    (plain text) are kept in the overlay as ``import_votes`` keeps them.

    An audit overlay's queue (``audit``: the revision's last) is a pair review: its findings
    confirmed by ``threshold`` ``same`` votes keep their verdict, those rejected by
    ``threshold`` ``different`` votes are cleared (``non_error``), the rest are left out; the
    tag's view defaults to ``decontaminated`` (``docs/review.md``, "Pairs"). ``corpus`` is
    refused as the server refuses it, before anything is written."""
    made_credit = overlay_credit(citation, credit)
    base = local_reader(registry).revision(spec)
    review_session.refuse_corpus(base, overlay=overlay, audit=audit, corpus=corpus)
    return review_session.finish_review(
        base,
        overlay=overlay,
        threshold=threshold,
        tagging=overlay_ops.Tagging(tag=tag, view=view, force=force),
        votes_per_item=votes_per_item,
        record=overlay_ops.Recording(
            command=command_of(command, "review_finish", spec), credit=made_credit
        ),
        audit=audit,
    )

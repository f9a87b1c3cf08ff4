"""``dsreg review``: serve the review page, or export or finish a review."""

from __future__ import annotations

import json as _json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from dsreg.api import reviewing as reviewing_api
from dsreg.api.options import (
    Opt,
    OverlayCitationOpt,
    OverlayCreditOpt,
    OverlayForceOpt,
    OverlayViewOpt,
)
from dsreg.cli._command import command
from dsreg.cli._common import command_line, out, overlay_made, say, write_json
from dsreg.errors import InvalidInputError

if TYPE_CHECKING:
    from dsreg.api import ReviewFinish, ReviewServer, SetAside


@dataclass(frozen=True, slots=True, kw_only=True)
class NotServing:
    """The command line's ways of not serving: ``--export`` the votes, or ``--finish`` the
    review (with its threshold, and the tag it may set). Refused together, and the finish's
    options without ``--finish``, before anything is read."""

    finish: Annotated[
        bool, Opt("--finish", help="Store the votes as a 'validated' overlay; no server.")
    ] = False
    threshold: Annotated[int, Opt(help="With --finish: agreement threshold t (of the votes).")] = 3
    tag: Annotated[str | None, Opt(help="With --finish: also tag a revision.")] = None
    view: OverlayViewOpt = None
    force: OverlayForceOpt = False
    citation: OverlayCitationOpt = None
    credit: OverlayCreditOpt = None
    export: Annotated[
        Path | None, Opt(help="Write the votes to this file (label-errors JSON); no server.")
    ] = None

    def __post_init__(self) -> None:
        if self.finish and self.export is not None:
            raise InvalidInputError("give --finish or --export, not both")
        if not self.finish and (self.tag is not None or self.view is not None or self.force):
            raise InvalidInputError("--tag, --view and --force go with --finish")
        if not self.finish and (self.citation is not None or self.credit is not None):
            raise InvalidInputError("--citation and --credit go with --finish")


@command(
    reviewing_api.review,
)
def review(
    spec: str,
    *,
    overlay: str | None,
    instead: NotServing,
    registry: Path | None,
    json: bool,
    **options: Any,
) -> None:
    """Review flagged rows in the browser; --finish stores the votes as a validated overlay.

    Prints the operator's link and the raters' (each with its access token) and serves until
    interrupted (Ctrl-C). Every answer is on disk before the page moves on; running it again
    resumes the review, on the same port with the same links.
    """
    if instead.export is not None:
        exported = reviewing_api.review_export(
            spec,
            instead.export,
            overlay=overlay,
            audit=options["audit"],
            corpus=options["corpus"],
            registry=registry,
        )
        say(f"Wrote {exported.records} voted items to {instead.export}")
        say_set_aside(exported.set_aside)
    elif instead.finish:
        res = reviewing_api.review_finish(
            spec,
            overlay=overlay,
            threshold=instead.threshold,
            tag=instead.tag,
            view=instead.view,
            force=instead.force,
            votes_per_item=options.get("votes_per_item"),
            citation=instead.citation,
            credit=instead.credit,
            audit=options["audit"],
            corpus=options["corpus"],
            command=command_line(),
            registry=registry,
        )
        show_finished(res, json=json)
    else:
        server = reviewing_api.review(spec, overlay=overlay, registry=registry, **options)
        serve(server, spec, json=json)


def show_finished(res: ReviewFinish, *, json: bool) -> None:
    say_set_aside(res.set_aside)
    if res.short and "undecided" in res.summary:
        say(
            f"Warning: finished early: {res.short} finding{'s have' if res.short > 1 else ' has'}"
            f" fewer than {res.votes_per_item} votes ({res.unvoted} with none); "
            f"{res.summary['undecided']} whose votes settle nothing yet, and those with none, "
            "are left out: over the audited revision they keep the audit's verdict"
        )
    elif res.short:
        left = res.summary.get("unreviewed", 0)
        say(
            f"Warning: finished early: {res.short} item{'s have' if res.short > 1 else ' has'} "
            f"fewer than {res.votes_per_item} votes ({res.unvoted} with none, left out); "
            f"{left} whose votes agree on nothing yet {'are' if left != 1 else 'is'} "
            "'unreviewed', which no view removes"
        )
    if overlay_made(res, json=json):
        return
    out(f"overlay        {res.digest}")
    for key, value in res.summary.items():
        if key != "rows":
            out(f"{key:<14} {value}")


def serve(server: ReviewServer, spec: str, *, json: bool) -> None:
    """Start ``server``, say where its page is, and serve until interrupted."""
    server.start()
    progress = server.progress()
    say_set_aside(server.set_aside)
    links = server.links
    if json:
        spans = [span.to_dict() for span in server.set_aside]
        started = {"url": server.url, "links": links, "items": progress.items, "set_aside": spans}
        write_json(_json.dumps(started) + "\n")
    else:
        say(
            f"Reviewing {progress.items} items of {spec} ({progress.everyone} votes so far); "
            "hand out these links (kept across restarts), Ctrl-C to stop:"
        )
        out(f"operator (can finish)      {links['operator']}")
        if "shared" in links:
            out(f"raters (each names self)   {links['shared']}")
        for name, link in links.get("raters", {}).items():
            out(f"rater {name}")
            out(f"  {link}")
    sys.stdout.flush()
    try:
        while server.running:
            server.wait(0.5)
    except KeyboardInterrupt:
        say("Stopped; every answer is saved. Run the same command to resume.")
    finally:
        server.stop()


def say_set_aside(spans: tuple[SetAside, ...]) -> None:
    """The damaged spans of a votes log, on stderr: how many records, and where each is."""
    if not spans:
        return
    records = sum(span.records for span in spans)
    say(
        f"Warning: the votes log has {len(spans)} damaged span{'s' if len(spans) > 1 else ''} "
        f"set aside, holding {records} record{'' if records == 1 else 's'} (answers, skips "
        "or undos) that are not counted; every record after them is kept:"
    )
    for span in spans:
        say(f"  {span.describe()}")

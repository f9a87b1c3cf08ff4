"""``dsreg review``: serve the review page, or export or finish a review."""

from __future__ import annotations

import json as _json
import sys
from pathlib import Path
from typing import Annotated

import typer

import dsreg
from dsreg.cli._common import (
    CONTEXT,
    JsonOpt,
    RegistryOpt,
    command_line,
    out,
    overlay_made,
    say,
    write_json,
)
from dsreg.errors import InvalidInputError


def register(app: typer.Typer) -> None:
    app.command(context_settings=CONTEXT)(review)


def review(
    spec: Annotated[str, typer.Argument(help="The revision whose flagged rows are reviewed.")],
    overlay: Annotated[
        str | None,
        typer.Option(help="The overlay whose rows are reviewed (default: the revision's last)."),
    ] = None,
    verdict: Annotated[str, typer.Option(help="Review the rows with this verdict.")] = "suspected",
    reviewer: Annotated[
        str | None, typer.Option(help="Open the page as this reviewer (put in the URL).")
    ] = None,
    votes_per_item: Annotated[
        int, typer.Option(help="An item leaves the queue with this many votes.")
    ] = 5,
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Port to listen on (0: a free one).")] = 0,
    finish: Annotated[
        bool, typer.Option("--finish", help="Store the votes as a 'validated' overlay; no server.")
    ] = False,
    threshold: Annotated[
        int, typer.Option(help="With --finish: agreement threshold t (of the votes).")
    ] = 3,
    tag: Annotated[str | None, typer.Option(help="With --finish: also tag a revision.")] = None,
    view: Annotated[str | None, typer.Option(help="With --tag: its view (default cleaned).")] = (
        None
    ),
    force: Annotated[bool, typer.Option(help="With --tag: move it if it exists.")] = False,
    export: Annotated[
        Path | None,
        typer.Option(help="Write the votes to this file (label-errors JSON); no server."),
    ] = None,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Review flagged rows in the browser; --finish stores the votes as a validated overlay.

    Prints the page's URL (with its access token) and serves until interrupted (Ctrl-C).
    Every answer is on disk before the page moves on; running it again resumes the review.
    """
    if finish and export is not None:
        raise InvalidInputError("give --finish or --export, not both")
    if not finish and (tag is not None or view is not None or force):
        raise InvalidInputError("--tag, --view and --force go with --finish")
    if export is not None:
        records = dsreg.review_export(spec, export, overlay=overlay, registry=registry_path)
        say(f"Wrote {records} voted items to {export}")
        _say_set_aside(records.set_aside)
        return
    if finish:
        res = dsreg.review_finish(
            spec,
            overlay=overlay,
            threshold=threshold,
            tag=tag,
            view=view,
            force=force,
            command=command_line(),
            registry=registry_path,
        )
        _say_set_aside(res.set_aside)
        if overlay_made(res, json=json):
            return
        out(f"overlay        {res.digest}")
        for key, value in res.summary.items():
            if key != "rows":
                out(f"{key:<14} {value}")
        return
    server = dsreg.review(
        spec,
        overlay=overlay,
        verdict=verdict,
        reviewer=reviewer,
        votes_per_item=votes_per_item,
        host=host,
        port=port,
        registry=registry_path,
    )
    server.start()
    progress = server.progress()
    _say_set_aside(server.set_aside)
    if json:
        spans = [span.to_dict() for span in server.set_aside]
        write_json(
            _json.dumps({"url": server.url, "items": progress.items, "set_aside": spans}) + "\n"
        )
    else:
        say(
            f"Reviewing {progress.items} items of {spec} ({progress.everyone} votes so far); "
            "open this URL, Ctrl-C to stop:"
        )
        out(server.url)
    sys.stdout.flush()
    try:
        while server.running:
            server.wait(0.5)
    except KeyboardInterrupt:
        say("Stopped; every answer is saved. Run the same command to resume.")
    finally:
        server.stop()


def _say_set_aside(spans: tuple[dsreg.SetAside, ...]) -> None:
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

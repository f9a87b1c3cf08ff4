"""Audit commands: ``dsreg audit duplicates``."""

from __future__ import annotations

from typing import Annotated

import typer

import dsreg
from dsreg.cli._common import (
    CONTEXT,
    JsonOpt,
    QuietOpt,
    RegistryOpt,
    command_line,
    emit_json,
    out,
    progress_bar,
    say,
    short,
    table,
)

__all__ = ["register"]

audit_app = typer.Typer(
    name="audit",
    help="Audit a test set: duplicates within it and contamination from other datasets.",
    context_settings=CONTEXT,
    no_args_is_help=True,
)
# Findings printed, at most; --json lists every one.
_SHOWN = 20


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app)


@audit_app.command("duplicates", context_settings=CONTEXT)
def duplicates(
    spec: Annotated[str, typer.Argument(help="The test set audited (a revision).")],
    against: Annotated[
        list[str] | None,
        typer.Option(
            "--against",
            help="A dataset whose rows the test set must not contain: a revision (typically "
            "the training set) or a folder of files; repeat for several.",
            show_default=False,
        ),
    ] = None,
    within: Annotated[
        bool, typer.Option("--within", help="Also find rows that repeat rows of the test set.")
    ] = False,
    image_threshold: Annotated[
        int | None,
        typer.Option(help="Near-duplicate images: pHash Hamming bits, 0-32 (default 10)."),
    ] = None,
    text_threshold: Annotated[
        float | None,
        typer.Option(help="Near-duplicate texts: shingle Jaccard, above 0 to 1 (default 0.3)."),
    ] = None,
    tag: Annotated[
        str | None, typer.Option(help="Also tag a revision with the audit overlay.")
    ] = None,
    view: Annotated[
        str | None, typer.Option(help="With --tag: its view (default decontaminated).")
    ] = None,
    force: Annotated[bool, typer.Option(help="With --tag: move it if it exists.")] = False,
    quiet: QuietOpt = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Find duplicated and contaminated rows; store them as an 'audit' overlay."""
    with progress_bar(quiet=quiet) as hook:
        res = dsreg.audit_duplicates(
            spec,
            against=against or [],
            within=within,
            image_threshold=image_threshold,
            text_threshold=text_threshold,
            tag=tag,
            view=view,
            force=force,
            progress=hook,
            command=command_line(),
            registry=registry_path,
        )
    if res.tagged is not None:
        t = res.tagged
        say(f"Tagged {t.dataset}@{t.tag} -> {short(t.revision)} [{t.view}]")
    if json:
        emit_json(res.to_dict())
        return
    c = res.counts
    out(f"overlay        {res.digest or '(none: nothing found)'}")
    out(
        f"audited        {res.audited} of {res.rows} rows "
        f"({res.skipped_labels_only} labels-only rows skipped, {len(res.unreadable)} unreadable)"
    )
    out(f"contaminated   {c.get('contaminated', 0)}")
    out(f"duplicate      {c.get('duplicate', 0)}")
    tiers = ", ".join(f"{k[5:]}: {v}" for k, v in c.items() if k.startswith("tier_"))
    if tiers:
        out(f"by tier        {tiers}")
    fp = res.fingerprints
    out(f"fingerprints   {fp.get('computed', 0)} computed, {fp.get('reused', 0)} reused")
    if res.findings:
        rows = [
            [
                str(f.row),
                f.example_id,
                f.verdict,
                f.matches[0]["tier"],
                f"{f.matches[0]['distance']:.3g}",
                f.matches[0]["example_id"],
                short(f.matches[0]["dataset"]),
                str(len(f.matches)),
            ]
            for f in res.findings[:_SHOWN]
        ]
        out("")
        out(table(rows, ["ROW", "ID", "VERDICT", "TIER", "DIST", "MATCH", "IN", "MATCHES"]))
        if len(res.findings) > _SHOWN:
            say(f"{len(res.findings) - _SHOWN} more findings: --json lists every one")
    for row, example_id, reason in res.unreadable[:_SHOWN]:
        say(f"Unreadable: row {row} ({example_id}): {reason}")
    if len(res.unreadable) > _SHOWN:
        say(f"{len(res.unreadable) - _SHOWN} more unreadable rows: --json lists every one")
    for path, reason in res.unreadable_against[:_SHOWN]:
        say(f"Unreadable in --against: {path}: {reason}")
    if len(res.unreadable_against) > _SHOWN:
        more = len(res.unreadable_against) - _SHOWN
        say(f"{more} more unreadable --against files: --json lists every one")

"""Audit commands: ``dsreg audit duplicates``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsreg.api import audit as audit_api
from dsreg.cli._command import command
from dsreg.cli._common import (
    command_line,
    out,
    overlay_made,
    printable,
    progress_bar,
    say,
    short,
    table,
)

if TYPE_CHECKING:
    from dsreg.api import AuditResult

__all__ = ["duplicates", "show_audit"]

# Findings and unreadable files printed, at most; --json lists every one.
_SHOWN = 20


@command(
    audit_api.audit_duplicates,
)
def duplicates(spec: str, *, quiet: bool, json: bool, **options: Any) -> None:
    """Find duplicated and contaminated rows; store them as an 'audit' overlay."""
    with progress_bar(quiet=quiet) as hook:
        res = audit_api.audit_duplicates(spec, progress=hook, command=command_line(), **options)
    if not overlay_made(res, json=json):
        show_audit(res)


def show_audit(res: AuditResult) -> None:
    """The audit's counts, then its first findings (nearest first) and what could not be read."""
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
    if res.unreadable_against:
        # Never matched, so never silently clean: counted here, each listed on stderr.
        out(f"unreadable     {len(res.unreadable_against)} in --against (listed on stderr)")
    if res.findings:
        rows = [
            [
                str(f.row),
                f.example_id,
                f.verdict,
                f.tier,
                f"{f.distance:.3g}",
                f.matches[0]["example_id"],
                short(f.matches[0]["dataset"]),
                str(len(f.matches)),
            ]
            for f in res.findings[:_SHOWN]
        ]
        out("")
        out(table(rows, ["ROW", "ID", "VERDICT", "TIER", "DIST", "MATCH", "IN", "MATCHES"]))
        _more(len(res.findings), "findings")
    for row, example_id, reason in res.unreadable[:_SHOWN]:
        say(f"Unreadable: row {row} ({printable(example_id)}): {printable(reason)}")
    _more(len(res.unreadable), "unreadable rows")
    for path, reason in res.unreadable_against[:_SHOWN]:
        say(f"Unreadable in --against: {printable(path)}: {printable(reason)}")
    _more(len(res.unreadable_against), "unreadable --against items")


def _more(count: int, what: str) -> None:
    if count > _SHOWN:
        say(f"{count - _SHOWN} more {what}: --json lists every one")

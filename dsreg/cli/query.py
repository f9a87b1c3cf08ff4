"""Query and report commands: sql, eval, diff, cite, export."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import dsreg.api as api
from dsreg.api import data as data_api
from dsreg.api import reports as reports_api
from dsreg.api.options import Opt
from dsreg.cli._command import command
from dsreg.cli._common import (
    SafeStream,
    command_line,
    emit_json,
    json_shown,
    out,
    printable,
    say,
    short,
    table,
    write_file_format,
    write_json,
)
from dsreg.cli.evaltext import quality_lines, render_eval
from dsreg.cli.results import render_citation, render_recorded
from dsreg.errors import InvalidInputError

if TYPE_CHECKING:
    from dsreg.api import Agreement, Citation, DiffResult, ExportResult, PinnedView

# -- sql ------------------------------------------------------------------------------------------


@command(
    data_api.sql,
)
def sql(query: str, *, format: str | None, output: Path | None, json: bool, **options: Any) -> None:
    """Run DuckDB SQL over revisions: SELECT label_name, count(*) FROM "cifar10-test@cleaned-v1"
    GROUP BY ALL. Columns: row, example_id, label, label_name, given_label, verdict, blob, size,
    suggested_label, suggested_label_name, score, votes_given, votes_guessed, votes_both,
    votes_neither, votes_neutral, votes_off_topic (of the last overlay naming the row), then
    the snapshot's metadata columns. Read-only unless --allow-files. With --remote, the
    revisions resolve with that remote: only manifests and tables are fetched, never payloads."""
    fmt = "json" if json else format
    if fmt is None:
        # As dsreg.sql decides for a path: out.parquet is Parquet, not a text table.
        suffix = output.suffix[1:] if output is not None else ""
        fmt = suffix if suffix in ("csv", "json", "parquet") else "table"
    if fmt == "parquet" and output is None and sys.stdout.isatty():
        raise InvalidInputError("--format parquet writes binary: give --output FILE or pipe it")
    if fmt == "table" and output is None:
        show_rows(data_api.sql(query, **options))
        return
    rows = data_api.sql(query, format=fmt, output=_sql_target(output, fmt), **options)
    if output is not None:
        # The data went to a file: say what is in it (stdout stays empty).
        say(f"Wrote {rows} row{'s' if rows != 1 else ''} to {output} ({fmt})")


def _sql_target(output: Path | None, fmt: str) -> Any:
    """Where the rows go: the file, or stdout. JSON is exact either way (its own escapes); CSV
    is exact into a pipe or file and escaped on a terminal; Parquet never reaches one."""
    if output is not None:
        return output
    if fmt == "json":
        return SafeStream(sys.stdout, json=True)
    if fmt == "csv" and sys.stdout.isatty():
        return SafeStream(sys.stdout)
    return sys.stdout


def show_rows(result: Any) -> None:
    """A query's rows (an Arrow table) as a text table: every cell through the sanitiser (a
    value is data)."""
    columns = [c.to_pylist() for c in result.columns]
    rows = [["NULL" if v is None else str(v) for v in r] for r in zip(*columns, strict=True)]
    out(table(rows, list(result.column_names)))
    say(f"({len(rows)} rows)")


# -- eval -----------------------------------------------------------------------------------------


@command(
    reports_api.evaluate,
    name="eval",
)
def eval_(
    spec: str,
    predictions: list[Path],
    *,
    plot: Path | None,
    flip_points: Annotated[
        bool, Opt("--flip-points", help="Print each pair's flip point.")
    ] = False,
    full: Annotated[
        bool, Opt("--full", help="Print every pair's test and the raters' scores.")
    ] = False,
    record: bool,
    json: bool,
    **options: Any,
) -> None:
    """Accuracy of model predictions on original, cleaned, corrected and honeypot labels, set
    accuracy on the multilabel view (ReaL accuracy), accuracy on the rows an audit did not
    name (decontaminated), agreement with raters' counts, each model's rank per view, and how
    the ranking changes (Northcutt et al. 2021, Table 3), with intervals, pairwise tests and
    rank intervals; --flip-points adds each pair's flip point.
    --record also keeps the predictions for 'dsreg leaderboard'."""
    report = reports_api.evaluate(
        spec, predictions, plot=plot, record=record, command=command_line(), **options
    )
    render_recorded(report.recorded)
    if plot is not None:
        say(f"Wrote the rank chart to {plot}")
    if json:
        write_json(report.to_json())
        return
    render_eval(report, full=full, flip_points=flip_points)


# -- diff -----------------------------------------------------------------------------------------


@command(
    reports_api.diff,
)
def diff(
    a: str,
    b: str,
    *,
    pairs: Annotated[
        int,
        Opt(
            help="How many from -> to label pairs to list, the most frequent first (0: all; "
            "--json lists all).",
            min=0,
            metavar="<int>",
        ),
    ] = 20,
    json: bool,
    **options: Any,
) -> None:
    """Rows only in A, only in B, and relabelled (with a from -> to count table). Revisions of one
    snapshot are matched by row, of different snapshots by example_id."""
    res = reports_api.diff(a, b, **options)
    if json_shown(res, json=json):
        return
    show_diff(res, pairs)


def show_diff(res: DiffResult, pairs: int) -> None:
    out(f"a  {res.a_revision}  {res.a}  ({res.rows_a} rows)")
    out(f"b  {res.b_revision}  {res.b}  ({res.rows_b} rows)")
    out(f"matched by {res.match}")
    out(f"only in a   {res.only_a}")
    out(f"only in b   {res.only_b}")
    out(f"relabelled  {res.relabelled}")
    out(f"unchanged   {res.unchanged}")
    if res.transitions:
        shown = res.transitions[:pairs] if pairs else res.transitions
        out()
        out(table([[t.source, t.target, str(t.count)] for t in shown], ["FROM", "TO", "ROWS"]))
        if len(shown) < len(res.transitions):
            more = len(res.transitions) - len(shown)
            rows = sum(t.count for t in res.transitions[len(shown) :])
            out(f"... {more} more pairs ({rows} rows): --pairs 0 or --json lists them all")
    if res.corrections is not None:
        show_agreement(res.corrections)
    for kind, ids in res.samples.items():
        if ids:
            say(f"first {kind.replace('_', ' ')}: {', '.join(map(printable, ids))}")


def _share(part: int, whole: int) -> str:
    return f"{part} of {whole}" + (f" ({100 * part / whole:.1f}%)" if whole else "")


def show_agreement(c: Agreement) -> None:
    """How the two sides' corrections agree (one snapshot, different overlays)."""
    out()
    out(f"corrections  a names {c.named_a} rows, b names {c.named_b}, both {c.named_both}")
    out(
        table(
            [[v.a or "-", v.b or "-", str(v.rows)] for v in c.verdicts],
            ["A VERDICT", "B VERDICT", "ROWS"],
        )
    )
    out(f"both call errors        {c.both_errors}")
    out(
        f"both relabel            {c.both_relabel}, same suggested label: "
        + _share(c.same_suggestion, c.both_relabel)
    )
    if c.a_in_b_labels[0]:
        out("a's label in b's set    " + _share(c.a_in_b_labels[1], c.a_in_b_labels[0]))
    if c.b_in_a_labels[0]:
        out("b's label in a's set    " + _share(c.b_in_a_labels[1], c.b_in_a_labels[0]))


# -- cite -----------------------------------------------------------------------------------------


@command(
    reports_api.cite,
)
def cite(spec: str, *, model: str | None, json: bool, **options: Any) -> None:
    """A citation (BibTeX, CITATION.cff or text) carrying the dataset, year, full revision,
    snapshot and overlay digests, the remote URL and the 'dsreg checkout DIGEST DIR --remote URL'
    that fetches it on a fresh machine, the dataset creators' credit and the dsreg version.
    With --model, the recorded result instead: revision, result and predictions digests and
    the figures."""
    c = reports_api.cite(spec, model=model, **options)
    if isinstance(c, api.Citation):
        show_citation(c, json=json)
    else:
        render_citation(c, json=json)


def show_citation(c: Citation, *, json: bool) -> None:
    text = str(c)
    if json:
        emit_json({**c.to_dict(), "format": c.format, "citation": text})
        return
    write_file_format(text)
    say(f"Cited {c.name} at revision {short(c.revision)}")
    for line in quality_lines(c.label_quality):  # stderr: stdout stays the citation alone
        say(line)
    if c.remote is None:
        say(
            "Note: no remote, so the citation names no place to fetch the revision: push it "
            "('dsreg push') and cite with --remote NAME|URL, or set a default remote."
        )


# -- export ---------------------------------------------------------------------------------------


@command(
    reports_api.export,
)
def export(spec: str, *, json: bool, **options: Any) -> None:
    """Write a revision's labels as .npy (an int64 vector), CSV, Parquet or JSON lines (row,
    example_id, label, label_name), with the label sets and raters' counts it carries, aligned
    to the snapshot's rows (the form evaluation scripts indexed by the test set's order expect)
    or to the view's. Streamed in batches. --format croissant writes a folder: the revision's
    Croissant 1.1 JSON-LD and the files it describes; --format datacite its DataCite JSON.
    With --to REMOTE, pins the view's rows as a Parquet object on that remote, named by its
    SHA-256, and prints its URL and digest; a second export of the revision uploads nothing."""
    show_exported(reports_api.export(spec, **options), json=json)


def show_exported(res: ExportResult | PinnedView, *, json: bool) -> None:
    if json_shown(res, json=json):
        return
    if isinstance(res, api.PinnedView):
        out(f"{res.url}\tsha256:{res.sha256}")
        done = "Uploaded" if res.uploaded else "Already pinned (nothing uploaded):"
        say(f"{done} the {res.view} view of {short(res.revision)}, {res.rows} rows, as Parquet")
        return
    out(res.revision)
    if res.format == "croissant":
        say(f"Wrote the Croissant document of {res.rows} rows and its files to {res.output}")
        return
    if res.format == "datacite":
        say(f"Wrote the DataCite record ({res.rows} rows) to {res.output}")
        return
    removed = f", {res.removed} removed by the view (-1)" if res.align == "snapshot" else ""
    say(f"Wrote {res.rows} labels ({res.align}-aligned{removed}) to {res.output} ({res.format})")
    if res.columns:
        say(f"with {' and '.join(res.columns)}" + "".join(f"\n  {p}" for p in res.beside))

"""Query and report commands: sql, eval, diff, cite, export."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

import dsreg
from dsreg.cli import results
from dsreg.cli._common import (
    CONTEXT,
    JsonOpt,
    ReadRemoteOpt,
    RegistryOpt,
    command_line,
    emit_json,
    out,
    say,
    short,
    table,
    write_json,
)
from dsreg.cli._text import SafeStream, printable, write_file_format
from dsreg.errors import InvalidInputError


def register(app: typer.Typer) -> None:
    app.command(context_settings=CONTEXT)(sql)
    app.command(name="eval", context_settings=CONTEXT)(eval_)
    app.command(context_settings=CONTEXT)(diff)
    app.command(context_settings=CONTEXT)(cite)
    app.command(name="export", context_settings=CONTEXT)(export)


# -- sql ------------------------------------------------------------------------------------------


def sql(
    query: Annotated[
        str, typer.Argument(help='SQL; name a revision as a quoted identifier: "dataset@tag".')
    ],
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            help="table, csv, json or parquet (default: --output's suffix if one of those, "
            "else table).",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    allow_files: Annotated[
        bool,
        typer.Option(
            "--allow-files",
            help="Give DuckDB its full access: read and write your own files, ATTACH, "
            "INSTALL/LOAD, SET. Without it SQL is read-only and reads revisions only.",
        ),
    ] = False,
    remote: ReadRemoteOpt = None,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
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
        _sql_table(dsreg.sql(query, allow_files=allow_files, remote=remote, registry=registry_path))
        return
    target: Any = output
    if output is None:
        # JSON is exact either way (its own escapes); CSV is exact into a pipe or file and
        # escaped on a terminal; Parquet never reaches one.
        target = sys.stdout
        if fmt == "json":
            target = SafeStream(sys.stdout, json=True)
        elif fmt == "csv" and sys.stdout.isatty():
            target = SafeStream(sys.stdout)
    rows = dsreg.sql(
        query,
        format=fmt,
        output=target,
        allow_files=allow_files,
        remote=remote,
        registry=registry_path,
    )
    if output is not None:
        # The data went to a file: say what is in it (stdout stays empty).
        say(f"Wrote {rows} row{'s' if rows != 1 else ''} to {output} ({fmt})")


def _sql_table(result: Any) -> None:
    """A query's rows as a text table: every cell through the sanitiser (a value is data)."""
    columns = [c.to_pylist() for c in result.columns]
    rows = [["NULL" if v is None else str(v) for v in r] for r in zip(*columns, strict=True)]
    out(table(rows, list(result.column_names)))
    say(f"({len(rows)} rows)")


# -- eval -----------------------------------------------------------------------------------------


def _split(text: str, what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise InvalidInputError(f"{what} is empty")
    return items


def eval_(
    spec: Annotated[
        str, typer.Argument(help="The revision; all views of its snapshot + overlays are scored.")
    ],
    predictions: Annotated[
        list[Path],
        typer.Argument(help="Predictions: .npy, .parquet or .csv; the model is the file stem."),
    ],
    views: Annotated[
        str, typer.Option(help="Views to score, comma-separated.")
    ] = "original,cleaned,corrected,honeypot,multilabel",
    top_k: Annotated[
        str, typer.Option("--top-k", help="Top-k accuracies, e.g. 1,5 (k > 1 needs probabilities).")
    ] = "1",
    plot: Annotated[
        Path | None, typer.Option(help="Write a slope chart of the ranks: FILE.png or FILE.svg.")
    ] = None,
    record: Annotated[
        bool,
        typer.Option(
            "--record",
            help="Keep the predictions (.npy, aligned with the snapshot's rows) in the registry "
            "for 'dsreg leaderboard'.",
        ),
    ] = False,
    model: Annotated[
        str | None, typer.Option(help="With --record: the model's name (default: file stem).")
    ] = None,
    meta: Annotated[
        list[str] | None, typer.Option(help="With --record: KEY=VALUE to keep; repeatable.")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="With --record: replace a model recorded otherwise.")
    ] = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Accuracy of model predictions on original, cleaned, corrected and honeypot labels, set
    accuracy on the multilabel view (ReaL accuracy), agreement with raters' counts, each
    model's rank per view, and how the ranking changes (Northcutt et al. 2021, Table 3)."""
    try:
        ks = [int(k) for k in _split(top_k, "--top-k")]
    except ValueError:
        raise InvalidInputError(f"--top-k {top_k!r}: give integers, e.g. 1,5") from None
    report = dsreg.evaluate(
        spec,
        list(predictions),
        views=_split(views, "--views"),  # type: ignore[arg-type]
        top_k=ks,
        plot=plot,
        registry=registry_path,
    )
    if record:
        recorded = dsreg.record(
            spec,
            list(predictions),
            model=model,
            meta=results.parse_meta(meta),
            force=force,
            command=command_line(),
            registry=registry_path,
        )
        results.render_recorded(recorded)
    if plot is not None:
        say(f"Wrote the rank chart to {plot}")
    if json:
        write_json(report.to_json())
        return
    _render_eval(report)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f}%"


def _rk(r: int | None) -> str:
    return "" if r is None else f" ({r})"


def _move(a: int | None, b: int | None) -> str:
    if a is None or b is None:
        return "-"
    d = a - b
    return f"{a} -> {b} ({'+' if d > 0 else ''}{d})" if d else f"{a} -> {b} (=)"


def _render_eval(report: dsreg.EvalReport) -> None:
    at = f"{report.dataset}@{report.tag}" if report.tag else report.spec
    out(f"revision  {report.revision}  ({at})")
    out("rows      " + ", ".join(f"{v} {n}" for v, n in report.views.items()))
    # An empty view (a honeypot without correctable rows) gets no columns, only its row count.
    shown = [v for v, n in report.views.items() if n]
    headers = ["MODEL"]
    for v in shown:
        if v == "honeypot":
            headers += ["HONEYPOT given", "HONEYPOT corrected"]
        elif v == "multilabel":
            headers.append("SET (multilabel)")  # top-1 only: a prediction in the label set
            continue
        else:
            headers.append(v.upper())
        headers += [f"{v.upper()} top-{k}" for k in report.top_k if k > 1]
    human = any(m.human is not None for m in report.models)
    if human:
        headers += ["MAJORITY", "AGREEMENT", "CROSS-ENTROPY"]
    if "original" in shown and "corrected" in shown:
        headers.append("RANK original -> corrected")
    if "honeypot" in shown:
        headers.append("RANK honeypot given -> corrected")
    if "original" in shown and "multilabel" in shown:
        headers.append("RANK original -> set")
    if human and "original" in shown:
        headers.append("RANK original -> majority")
    rows = []
    for m in report.models:
        r = [m.model]
        for v in shown:
            s = m.scores[v]
            if v == "honeypot":
                r.append(_pct(s.given_accuracy(1)) + _rk(s.given_rank))
            r.append(_pct(s.accuracy(1)) + _rk(s.rank))
            if v != "multilabel":
                r += [_pct(s.accuracy(k)) for k in report.top_k if k > 1]
        hs = m.human
        if human:
            r.append("-" if hs is None else _pct(hs.majority_accuracy) + _rk(hs.rank))
            r.append("-" if hs is None else _pct(hs.expected_agreement))
            r.append("-" if hs is None or hs.cross_entropy is None else f"{hs.cross_entropy:.4f}")
        if "original" in shown and "corrected" in shown:
            r.append(_move(m.scores["original"].rank, m.scores["corrected"].rank))
        if "honeypot" in shown:
            h = m.scores["honeypot"]
            r.append(_move(h.given_rank, h.rank))
        if "original" in shown and "multilabel" in shown:
            r.append(_move(m.scores["original"].rank, m.scores["multilabel"].rank))
        if human and "original" in shown:
            r.append(_move(m.scores["original"].rank, hs.rank if hs else None))
        rows.append(r)
    out()
    out(table(rows, headers))
    out()
    for m in report.models:
        p = m.predictions
        where = p.file if p.file else f"({p.format})"
        model, where = printable(m.model), printable(where)
        out(f"predictions  {model}: {p.digest or '-'}  {where}  [{p.kind}]")
    if report.views.get("honeypot") == 0 and report.overlays:
        say("Note: the honeypot is empty: no overlay of this revision has correctable rows")
    for note in report.notes:
        say(f"Note: {note}")


# -- diff -----------------------------------------------------------------------------------------


def diff(
    a: Annotated[str, typer.Argument(help="The first revision, e.g. cifar10-test@original.")],
    b: Annotated[str, typer.Argument(help="The second revision, e.g. cifar10-test@corrected-v1.")],
    top: Annotated[
        int, typer.Option(help="How many example ids of each kind of change to list (0: none).")
    ] = 10,
    pairs: Annotated[
        int,
        typer.Option(
            help="How many from -> to label pairs to list, the most frequent first (0: all; "
            "--json lists all).",
            min=0,
            metavar="<int>",
        ),
    ] = 20,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Rows only in A, only in B, and relabelled (with a from -> to count table). Revisions of one
    snapshot are matched by row, of different snapshots by example_id."""
    res = dsreg.diff(a, b, top=top, registry=registry_path)
    if json:
        emit_json(res.to_dict())
        return
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
        _render_agreement(res.corrections)
    for kind, ids in res.samples.items():
        if ids:
            say(f"first {kind.replace('_', ' ')}: {', '.join(map(printable, ids))}")


def _share(part: int, whole: int) -> str:
    return f"{part} of {whole}" + (f" ({100 * part / whole:.1f}%)" if whole else "")


def _render_agreement(c: dsreg.Agreement) -> None:
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


def cite(
    spec: Annotated[str, typer.Argument(help="The revision to cite: dataset@tag or a digest.")],
    format: Annotated[str, typer.Option("--format", "-f", help="bibtex, cff or text.")] = "bibtex",
    author: Annotated[
        list[str] | None,
        typer.Option("--author", help="An author (person or organisation); repeat for several."),
    ] = None,
    remote: Annotated[
        str | None,
        typer.Option(
            "--remote",
            "-r",
            help="Where readers fetch it: a remote's name or a URL (default: the default "
            "remote). Not contacted: push the revision there first.",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Cite this recorded model's result on the revision, with its figures."),
    ] = None,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """A citation (BibTeX, CITATION.cff or text) carrying the dataset, year, full revision,
    snapshot and overlay digests, the remote URL and the 'dsreg checkout DIGEST DIR --remote URL'
    that fetches it on a fresh machine, the dataset creators' credit and the dsreg version.
    With --model, the recorded result instead: revision, result and predictions digests and
    the figures."""
    if model is not None:
        results.render_citation(
            dsreg.cite_result(spec, model=model, registry=registry_path), json=json
        )
        return
    c = dsreg.cite(spec, format=format, authors=author, remote=remote, registry=registry_path)
    text = str(c)
    if json:
        emit_json({**c.to_dict(), "format": c.format, "citation": text})
        return
    write_file_format(text)
    say(f"Cited {c.name} at revision {short(c.revision)}")
    if c.remote is None:
        say(
            "Note: no remote, so the citation names no place to fetch the revision: push it "
            "('dsreg push') and cite with --remote NAME|URL, or set a default remote."
        )


# -- export ---------------------------------------------------------------------------------------


def export(
    spec: Annotated[str, typer.Argument(help="The revision: dataset@tag or a digest.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The file to write.")],
    format: Annotated[
        str | None,
        typer.Option("--format", "-f", help="npy, csv or parquet (default: the output's suffix)."),
    ] = None,
    align: Annotated[
        str,
        typer.Option(
            help="snapshot: one entry per snapshot row, -1 where the view removes it; "
            "view: the view's rows only."
        ),
    ] = "snapshot",
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Write a revision's labels as .npy (an int64 vector), CSV or Parquet (row, example_id,
    label, label_name), aligned to the snapshot's rows (the form evaluation scripts indexed by
    the test set's order expect) or to the view's. Streamed in batches."""
    res = dsreg.export(spec, output, format=format, align=align, registry=registry_path)
    if json:
        emit_json(res.to_dict())
        return
    out(res.revision)
    removed = f", {res.removed} removed by the view (-1)" if res.align == "snapshot" else ""
    say(f"Wrote {res.rows} labels ({res.align}-aligned{removed}) to {res.output} ({res.format})")

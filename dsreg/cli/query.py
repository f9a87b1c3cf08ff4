"""Query and report commands: sql, eval, diff, cite."""

from __future__ import annotations

import io
import json as _json
import sys
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from dsreg.cli._common import CONTEXT, JsonOpt, RegistryOpt, emit_json, out, registry, say, table
from dsreg.errors import InvalidInputError, StorageError
from dsreg.objects.digest import short


def register(app: typer.Typer) -> None:
    app.command(context_settings=CONTEXT)(sql)
    app.command(name="eval", context_settings=CONTEXT)(eval_)
    app.command(context_settings=CONTEXT)(diff)
    app.command(context_settings=CONTEXT)(cite)


# -- sql ------------------------------------------------------------------------------------------


def sql(
    query: Annotated[
        str, typer.Argument(help='SQL; name a revision as a quoted identifier: "dataset@tag".')
    ],
    format: Annotated[
        str, typer.Option("--format", "-f", help="table, csv, json or parquet.")
    ] = "table",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Run DuckDB SQL over revisions: SELECT label_name, count(*) FROM "cifar10-test@cleaned-v1"
    GROUP BY ALL. Columns: row, example_id, label, label_name, given_label, verdict, blob, size,
    then the snapshot's metadata columns."""
    from dsreg.views.sql import Connection

    fmt = "json" if json else format
    if fmt not in ("table", "csv", "json", "parquet"):
        raise InvalidInputError(f"unknown --format {fmt!r}; choose table, csv, json or parquet")
    if fmt == "parquet" and output is None and sys.stdout.isatty():
        raise InvalidInputError("--format parquet writes binary: give --output FILE or pipe it")
    with Connection(registry(registry_path)) as con:
        schema, batches = con.batches(query)
        binary = fmt in ("parquet", "csv")
        if output is not None:
            try:
                f: IO[Any] = open(output, "wb") if binary else open(output, "w", encoding="utf-8")  # noqa: SIM115
            except OSError as e:
                raise StorageError(f"cannot write {output}: {e.strerror}") from e
            with f:
                _write(fmt, schema, batches, f)
        elif binary and not hasattr(sys.stdout, "buffer"):
            buf = io.BytesIO()  # stdout replaced by a text stream (tests, notebooks)
            _write(fmt, schema, batches, buf)
            sys.stdout.write(buf.getvalue().decode("utf-8", errors="replace"))
        else:
            _write(fmt, schema, batches, sys.stdout.buffer if binary else sys.stdout)
            sys.stdout.flush()


def _write(fmt: str, schema: Any, batches: Any, stream: IO[Any]) -> None:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        with pq.ParquetWriter(stream, schema) as w:
            for b in batches:
                w.write_batch(b)
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        with pacsv.CSVWriter(stream, schema) as w:
            for b in batches:
                w.write_batch(b)
    elif fmt == "json":
        stream.write("[")
        first = True
        for b in batches:
            for r in b.to_pylist():
                stream.write(("\n  " if first else ",\n  ") + _json.dumps(r, default=str))
                first = False
        stream.write("\n]\n" if not first else "]\n")
    else:
        rows = [
            ["NULL" if v is None else str(v) for v in r.values()]
            for b in batches
            for r in b.to_pylist()
        ]
        stream.write(table(rows, list(schema.names)) + "\n")
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
    ] = "original,cleaned,corrected,honeypot",
    top_k: Annotated[
        str, typer.Option("--top-k", help="Top-k accuracies, e.g. 1,5 (k > 1 needs probabilities).")
    ] = "1",
    plot: Annotated[
        Path | None, typer.Option(help="Write a slope chart of the ranks: FILE.png or FILE.svg.")
    ] = None,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Accuracy of model predictions on original, cleaned, corrected and honeypot labels, each
    model's rank per view, and how the ranking changes (Northcutt et al. 2021, Table 3)."""
    from dsreg.report.evaluate import evaluate

    try:
        ks = [int(k) for k in _split(top_k, "--top-k")]
    except ValueError:
        raise InvalidInputError(f"--top-k {top_k!r}: give integers, e.g. 1,5") from None
    report = evaluate(
        spec,
        list(predictions),
        views=_split(views, "--views"),  # type: ignore[arg-type]
        top_k=ks,
        registry=registry(registry_path),
    )
    if plot is not None:
        from dsreg.report.plot import plot_ranks

        plot_ranks(report, plot)
        say(f"Wrote the rank chart to {plot}")
    if json:
        sys.stdout.write(report.to_json())
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


def _render_eval(report: Any) -> None:
    at = f"{report.dataset}@{report.tag}" if report.tag else report.spec
    out(f"revision  {report.revision}  ({at})")
    out("rows      " + ", ".join(f"{v} {n}" for v, n in report.views.items()))
    # An empty view (a honeypot without correctable rows) gets no columns, only its row count.
    shown = [v for v, n in report.views.items() if n]
    headers = ["MODEL"]
    for v in shown:
        if v == "honeypot":
            headers += ["HONEYPOT given", "HONEYPOT corrected"]
        else:
            headers.append(v.upper())
        headers += [f"{v.upper()} top-{k}" for k in report.top_k if k > 1]
    if "original" in shown and "corrected" in shown:
        headers.append("RANK original -> corrected")
    if "honeypot" in shown:
        headers.append("RANK honeypot given -> corrected")
    rows = []
    for m in report.models:
        r = [m.model]
        for v in shown:
            s = m.scores[v]
            if v == "honeypot":
                r.append(_pct(s.given_accuracy(1)) + _rk(s.given_rank))
            r.append(_pct(s.accuracy(1)) + _rk(s.rank))
            r += [_pct(s.accuracy(k)) for k in report.top_k if k > 1]
        if "original" in shown and "corrected" in shown:
            r.append(_move(m.scores["original"].rank, m.scores["corrected"].rank))
        if "honeypot" in shown:
            h = m.scores["honeypot"]
            r.append(_move(h.given_rank, h.rank))
        rows.append(r)
    out()
    out(table(rows, headers))
    out()
    for m in report.models:
        p = m.predictions
        where = p.file if p.file else f"({p.format})"
        out(f"predictions  {m.model}: {p.digest or '-'}  {where}  [{p.kind}]")
    if report.views.get("honeypot") == 0 and report.overlays:
        say("Note: the honeypot is empty: no overlay of this revision has correctable rows")
    for note in report.notes:
        say(f"Note: {note}")


# -- diff -----------------------------------------------------------------------------------------


def diff(
    a: Annotated[str, typer.Argument(help="The first revision, e.g. cifar10-test@original.")],
    b: Annotated[str, typer.Argument(help="The second revision, e.g. cifar10-test@corrected-v1.")],
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Rows only in A, only in B, and relabelled (with a from -> to count table). Revisions of one
    snapshot are matched by row, of different snapshots by example_id."""
    from dsreg.report.diff import diff as do_diff

    res = do_diff(registry(registry_path), a, b)
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
        out()
        out(
            table(
                [[t.source, t.target, str(t.count)] for t in res.transitions],
                ["FROM", "TO", "ROWS"],
            )
        )
    for kind, ids in res.samples.items():
        if ids:
            say(f"first {kind.replace('_', ' ')}: {', '.join(ids)}")


# -- cite -----------------------------------------------------------------------------------------


def cite(
    spec: Annotated[str, typer.Argument(help="The revision to cite: dataset@tag or a digest.")],
    format: Annotated[str, typer.Option("--format", "-f", help="bibtex, cff or text.")] = "bibtex",
    author: Annotated[
        list[str] | None,
        typer.Option("--author", help="An author (person or organisation); repeat for several."),
    ] = None,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """A citation (BibTeX, CITATION.cff or text) carrying the dataset, tag, full revision,
    snapshot and overlay digests and the dsreg version; 'dsreg show <digest>' resolves each."""
    from dsreg.report.cite import FORMATS
    from dsreg.report.cite import cite as do_cite

    if format not in FORMATS:
        raise InvalidInputError(f"unknown --format {format!r}; choose {', '.join(FORMATS)}")
    c = do_cite(registry(registry_path), spec, authors=author or ())
    text = c.render(format)
    if json:
        emit_json({**c.to_dict(), "format": format, "citation": text})
        return
    sys.stdout.write(text)
    say(f"Cited {c.name} at revision {short(c.revision)}")

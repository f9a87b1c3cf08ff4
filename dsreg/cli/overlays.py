"""Overlay commands: detect, and overlay ls / show / import-votes."""

from __future__ import annotations

import json as _json
from pathlib import Path
from typing import Annotated, Any

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
    overlay_made,
    progress_bar,
    say,
    short,
    table,
)
from dsreg.cli._text import printable, write_file_format
from dsreg.detector.options import FILTER_BY, RANK_BY
from dsreg.errors import InvalidInputError

overlay_app = typer.Typer(
    name="overlay",
    help="Label-correction overlays: list, show, export; import votes, relabelings, corrections.",
    context_settings=CONTEXT,
    no_args_is_help=True,
)

# Both overlay producers can tag a revision with the overlay they make.
TagOpt = Annotated[str | None, typer.Option(help="Also tag a revision with the new overlay.")]
ViewOpt = Annotated[str | None, typer.Option(help="With --tag: its view (default cleaned).")]
ForceOpt = Annotated[bool, typer.Option(help="With --tag: move it if it exists.")]


def register(app: typer.Typer) -> None:
    app.command(context_settings=CONTEXT)(detect)
    app.add_typer(overlay_app)


def _score(value: float | None) -> str:
    """A label-quality score as printed: four significant digits, so that small scores stay
    apart (``4e-05``, never ``0.0000``); empty for none."""
    return "" if value is None else f"{value:.4g}"


def detect(
    spec: Annotated[str, typer.Argument(help="The revision whose labels are checked.")],
    pred_probs: Annotated[
        Path,
        typer.Option(
            "--pred-probs",
            help="Out-of-sample predicted probabilities, n x k, aligned with the revision's rows "
            "(.npy, memory-mapped; or .parquet).",
        ),
    ],
    filter_by: Annotated[
        str, typer.Option(help="cleanlab's filter_by: " + ", ".join(FILTER_BY) + ".")
    ] = "prune_by_noise_rate",
    rank_by: Annotated[
        str, typer.Option(help="Label-quality score: " + ", ".join(RANK_BY) + ".")
    ] = "self_confidence",
    frac_noise: Annotated[
        float, typer.Option(help="Fraction of the estimated issues to flag.")
    ] = 1.0,
    num_to_remove_per_class: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated counts, one per class (filter_by prune_by_class/both/…)."
        ),
    ] = None,
    min_examples_per_class: Annotated[
        int, typer.Option(help="Never flag a class below this many remaining examples.")
    ] = 1,
    tag: TagOpt = None,
    view: ViewOpt = None,
    force: ForceOpt = False,
    top: Annotated[int, typer.Option(help="How many of the ranked issues to print.")] = 10,
    quiet: QuietOpt = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Find label issues with confident learning; store them as a 'detected' overlay."""
    per_class = None
    if num_to_remove_per_class is not None:
        try:
            per_class = [int(x) for x in num_to_remove_per_class.split(",")]
        except ValueError:
            raise InvalidInputError(
                f"--num-to-remove-per-class {num_to_remove_per_class!r} is not a list of integers"
            ) from None
    with progress_bar(quiet=quiet) as hook:
        res = dsreg.detect(
            spec,
            pred_probs,
            filter_by=filter_by,
            rank_by=rank_by,
            frac_noise=frac_noise,
            num_to_remove_per_class=per_class,
            min_examples_per_class=min_examples_per_class,
            tag=tag,
            view=view,
            force=force,
            top=top,
            progress=hook,
            command=command_line(),
            registry=registry_path,
        )
    ranked = [i.to_dict() for i in res.top]
    if overlay_made(res, json=json, top=ranked):
        return
    s = res.summary
    if s.get("renormalized_rows"):
        # Only rows further from 1 than float rounding are counted; say how far that is.
        n = s["renormalized_rows"]
        rows, were, their = (f"{n} rows", "were", "their") if n != 1 else ("1 row", "was", "its")
        say(
            f"Note: {rows} of probabilities summed to 1 only within 1e-3, further off than "
            f"float rounding ({_score(res.details.sum_tolerance)} for this dtype and "
            f"{res.details.k} classes), and {were} divided by {their} sum before detection."
        )
    out(f"overlay        {res.digest}")
    # One figure for how many labels are wrong (the noise rate); the flagged rows are the
    # filter's candidates for review, which need not number the same.
    n = res.details.n
    rate = s["noise_rate"]
    out(f"label errors   {100 * rate:.2f}% estimated wrong (noise rate: about {round(rate * n)} "
        f"of the {n} rows scanned)")  # fmt: skip
    out(f"flagged        {s['rows']} rows for review ({filter_by}, ranked by {rank_by}): "
        "candidates to check, not a count of errors")  # fmt: skip
    if s["issues_per_class"]:
        per_class = s["issues_per_class"].items()
        out("per class      " + ", ".join(f"{printable(k)}: {v}" for k, v in per_class))
    if ranked:
        out("")
        out(
            table(
                [
                    [
                        str(r["row"]),
                        r["example_id"],
                        r["given"],
                        r["suggested"],
                        _score(r["score"]),
                    ]
                    for r in ranked
                ],
                ["ROW", "EXAMPLE", "GIVEN", "SUGGESTED", "SCORE"],
            )
        )


@overlay_app.command("import-votes", context_settings=CONTEXT)
def import_votes(
    spec: Annotated[str, typer.Argument(help="The revision whose snapshot the votes are about.")],
    votes: Annotated[Path, typer.Argument(help="The votes file.")],
    format: Annotated[
        str, typer.Option("--format", help="label-errors (the release's JSON) or csv.")
    ] = "label-errors",
    threshold: Annotated[int, typer.Option(help="Agreement threshold t (of n raters).")] = 3,
    tag: TagOpt = None,
    view: ViewOpt = None,
    force: ForceOpt = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Import human validation votes as a 'validated' overlay (Northcutt et al. 2021 categories)."""
    res = dsreg.import_votes(
        spec,
        votes,
        format=format,
        threshold=threshold,
        tag=tag,
        view=view,
        force=force,
        command=command_line(),
        registry=registry_path,
    )
    if overlay_made(res, json=json):
        return
    s = res.summary
    out(f"overlay        {res.digest}")
    out(f"checked        {s.get('checked', s['rows'])}")
    out(f"errors         {s.get('errors', '')}")
    for v in ("non_error", "correctable", "multi_label", "neither", "non_agreement"):
        out(f"{v:<14} {s.get(v, 0)}")


@overlay_app.command("import-labels", context_settings=CONTEXT)
def import_labels(
    spec: Annotated[str, typer.Argument(help="The revision whose snapshot the file is about.")],
    file: Annotated[Path, typer.Argument(help="The relabeling or corrections file.")],
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="real (ImageNet-ReaL real.json), counts (n x k rater counts, .npy or "
            ".parquet, as CIFAR-10H) or csv (your own corrections: a manual overlay).",
        ),
    ],
    threshold: Annotated[
        float, typer.Option(help="counts: the share of raters a label needs to decide.")
    ] = 0.5,
    tag: TagOpt = None,
    view: ViewOpt = None,
    force: ForceOpt = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Import a relabeling (label sets, rater counts) or your own corrections as an overlay."""
    res = dsreg.import_labels(
        spec,
        file,
        format=format,
        threshold=threshold,
        tag=tag,
        view=view,
        force=force,
        command=command_line(),
        registry=registry_path,
    )
    if overlay_made(res, json=json):
        return
    s = res.summary
    how = {
        "file_name": "by ImageNet validation file name",
        "position": "by position (row i is the file's entry i)",
        "row": "by the 'row' column",
        "example_id": "by the 'example_id' column",
    }
    out(f"overlay        {res.digest} ({res.kind})")
    out(f"matched        {s['checked']} rows {how.get(s['match'], s['match'])}")
    out(f"errors         {s['errors']}")
    for v in ("non_error", "correctable", "multi_label", "neither", "non_agreement", "suspected"):
        if v in s:
            out(f"{v:<14} {s[v]}")


@overlay_app.command("export", context_settings=CONTEXT)
def export(
    digest: Annotated[str, typer.Argument(help="Overlay digest or prefix (>= 6 hex).")],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to FILE (default: stdout).")
    ] = None,
    registry_path: RegistryOpt = None,
) -> None:
    """Write an overlay's corrections as CSV, which 'import-labels --format csv' reads back."""
    text = dsreg.overlay_export(digest, output, registry=registry_path)
    if output is None:
        # A file format: exact into a pipe or file, escaped on a terminal.
        write_file_format(text)
    else:
        say(f"Wrote {text.count(chr(10)) - 1} corrections to {output}")


@overlay_app.command("ls", context_settings=CONTEXT)
def ls(
    dataset: Annotated[str, typer.Argument(help="Dataset name.")],
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """List a dataset's overlays: digest, kind, producer, rows."""
    records = dsreg.overlay_ls(dataset, registry=registry_path)
    if json:
        emit_json([{"digest": r.digest, **r.overlay.to_dict()} for r in records])
        return
    if not records:
        say(
            f"No overlays for {dataset!r} yet: make one with 'dsreg detect' "
            "or 'dsreg overlay import-votes'."
        )
        return
    out(
        table(
            [
                [
                    short(r.digest),
                    r.overlay.kind,
                    r.overlay.producer.get("name", ""),
                    str(r.overlay.summary.get("rows", "")),
                    short(r.overlay.base),
                ]
                for r in records
            ],
            ["OVERLAY", "KIND", "PRODUCER", "ROWS", "SNAPSHOT"],
        )
    )


@overlay_app.command("show", context_settings=CONTEXT)
def show(
    digest: Annotated[str, typer.Argument(help="Overlay digest or prefix (>= 6 hex).")],
    rows: Annotated[int, typer.Option(help="How many corrections to print.")] = 20,
    sort: Annotated[
        str,
        typer.Option(
            help="row: in row order; score: worst label quality first (rows without a score last)."
        ),
    ] = "row",
    verdict: Annotated[
        str | None,
        typer.Option(
            help="Only the corrections with this verdict (suspected, non_error, correctable, "
            "multi_label, neither, non_agreement)."
        ),
    ] = None,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Show an overlay: manifest, summary and its first corrections."""
    info = dsreg.overlay_show(
        digest,
        rows=rows,
        sort=sort,  # type: ignore[arg-type]  # checked by the library, with the choices
        verdict=verdict,
        registry=registry_path,
    )
    if json:
        emit_json(info.to_dict())
        return
    ov = info.overlay
    out(f"overlay   {info.digest}")
    out(f"kind      {ov.kind}" + (" (unvalidated)" if ov.kind == "detected" else ""))
    out(f"base      {ov.base} ({info.dataset})")
    name_version = printable(f"{ov.producer['name']} {ov.producer['version']}")
    out(f"producer  {name_version} " + _json.dumps(ov.producer["params"], sort_keys=True))
    out(f"summary   {_json.dumps(ov.summary, sort_keys=True)}")
    out("")

    def name(i: int | None) -> str:
        return "" if i is None else info.classes[i]

    # A version 2 overlay's label sets and raters' counts, as class names (labels; label:count).
    sets = ov.version == 2

    def lists(r: dict[str, Any]) -> list[str]:
        if not sets:
            return []
        labels = r.get("labels")
        counts = r.get("label_counts")
        return [
            "" if labels is None else ";".join(name(i) for i in labels),
            "" if counts is None else ";".join(f"{name(c['label'])}:{c['count']}" for c in counts),
        ]

    out(
        table(
            [
                [
                    str(r["row"]),
                    r["example_id"],
                    name(r["given_label"]),
                    name(r["suggested_label"]),
                    r["verdict"],
                    _score(r["score"]),
                    *lists(r),
                ]
                for r in info.corrections
            ],
            ["ROW", "EXAMPLE", "GIVEN", "SUGGESTED", "VERDICT", "SCORE"]
            + (["LABELS", "RATERS"] if sets else []),
        )
    )
    if not info.corrections and verdict is not None:
        say(f"No corrections with verdict {verdict!r} in this overlay.")
    if info.total > rows:
        say(f"({info.total - rows} more; --rows N or --json)")

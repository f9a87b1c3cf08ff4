"""Overlay commands: detect, and overlay import-votes / import-labels / export / ls / show."""

from __future__ import annotations

import json as _json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsreg.api import data as data_api
from dsreg.cli._command import command
from dsreg.cli._common import (
    command_line,
    emit_json,
    json_shown,
    out,
    overlay_made,
    printable,
    progress_bar,
    say,
    short,
    table,
    write_file_format,
)

if TYPE_CHECKING:
    from dsreg.api import OverlayInfo, OverlayRecord, OverlayResult


def score(value: float | None) -> str:
    """A label-quality score as printed: four significant digits, so that small scores stay
    apart (``4e-05``, never ``0.0000``); empty for none."""
    return "" if value is None else f"{value:.4g}"


@command(
    data_api.detect,
)
def detect(
    spec: str, *, filter_by: str, rank_by: str, quiet: bool, json: bool, **options: Any
) -> None:
    """Find label issues with confident learning; store them as a 'detected' overlay."""
    with progress_bar(quiet=quiet) as hook:
        res = data_api.detect(
            spec,
            filter_by=filter_by,
            rank_by=rank_by,
            progress=hook,
            command=command_line(),
            **options,
        )
    ranked = [i.to_dict() for i in res.top]
    if not overlay_made(res, json=json, top=ranked):
        show_detection(res, ranked, f"{filter_by}, ranked by {rank_by}")


def show_detection(res: OverlayResult, ranked: list[dict[str, Any]], how: str) -> None:
    s, details = res.summary, res.details
    if s.get("renormalized_rows"):
        # Only rows further from 1 than float rounding are counted; say how far that is.
        n = s["renormalized_rows"]
        rows, were, their = (f"{n} rows", "were", "their") if n != 1 else ("1 row", "was", "its")
        say(
            f"Note: {rows} of probabilities summed to 1 only within 1e-3, further off than "
            f"float rounding ({score(details.sum_tolerance)} for this dtype and "
            f"{details.k} classes), and {were} divided by {their} sum before detection."
        )
    out(f"overlay        {res.digest}")
    # One figure for how many labels are wrong (the noise rate); the flagged rows are the
    # filter's candidates for review, which need not number the same.
    n = details.n
    rate = s["noise_rate"]
    out(f"label errors   {100 * rate:.2f}% estimated wrong (noise rate: about {round(rate * n)} "
        f"of the {n} rows scanned)")  # fmt: skip
    out(f"flagged        {s['rows']} rows for review ({how}): "
        "candidates to check, not a count of errors")  # fmt: skip
    if s["issues_per_class"]:
        per_class = s["issues_per_class"].items()
        out("per class      " + ", ".join(f"{printable(k)}: {v}" for k, v in per_class))
    if ranked:
        out("")
        issues = [
            [str(r["row"]), r["example_id"], r["given"], r["suggested"], score(r["score"])]
            for r in ranked
        ]
        out(table(issues, ["ROW", "EXAMPLE", "GIVEN", "SUGGESTED", "SCORE"]))


@command(
    data_api.import_votes,
)
def import_votes(spec: str, votes: Path, *, json: bool, **options: Any) -> None:
    """Import human validation votes as a 'validated' overlay (Northcutt et al. 2021 categories)."""
    res = data_api.import_votes(spec, votes, command=command_line(), **options)
    if not overlay_made(res, json=json):
        show_votes(res)


def show_votes(res: OverlayResult) -> None:
    """An overlay of votes: how many rows were checked, and each verdict's count."""
    s = res.summary
    out(f"overlay        {res.digest}")
    out(f"checked        {s.get('checked', s['rows'])}")
    out(f"errors         {s.get('errors', '')}")
    for v in ("non_error", "correctable", "multi_label", "neither", "non_agreement"):
        out(f"{v:<14} {s.get(v, 0)}")


@command(
    data_api.import_labels,
)
def import_labels(spec: str, path: Path, *, json: bool, **options: Any) -> None:
    """Import a relabeling (label sets, rater counts) or your own corrections as an overlay."""
    res = data_api.import_labels(spec, path, command=command_line(), **options)
    if not overlay_made(res, json=json):
        show_relabeled(res)


# How a relabeling's records were matched to the snapshot's rows.
MATCHED = {
    "file_name": "by ImageNet validation file name",
    "position": "by position (row i is the file's entry i)",
    "row": "by the 'row' column",
    "example_id": "by the 'example_id' column",
}


def show_relabeled(res: OverlayResult) -> None:
    s = res.summary
    out(f"overlay        {res.digest} ({res.kind})")
    out(f"matched        {s['checked']} rows {MATCHED.get(s['match'], s['match'])}")
    out(f"errors         {s['errors']}")
    for v in ("non_error", "correctable", "multi_label", "neither", "non_agreement", "suspected"):
        if v in s:
            out(f"{v:<14} {s[v]}")


@command(
    data_api.overlay_export,
    name="export",
)
def export(digest: str, output: Path | None, **options: Any) -> None:
    """Write an overlay's corrections as CSV, which 'import-labels --format csv' reads back."""
    text = data_api.overlay_export(digest, output, **options)
    if output is None:
        # A file format: exact into a pipe or file, escaped on a terminal.
        write_file_format(text)
    else:
        say(f"Wrote {text.count(chr(10)) - 1} corrections to {output}")


@command(
    data_api.overlay_ls,
    name="ls",
)
def ls(dataset: str, *, json: bool, **options: Any) -> None:
    """List a dataset's overlays: digest, kind, producer, rows."""
    show_overlays(data_api.overlay_ls(dataset, **options), dataset, json=json)


def show_overlays(records: list[OverlayRecord], dataset: str, *, json: bool) -> None:
    if json:
        emit_json([{"digest": r.digest, **r.overlay.to_dict()} for r in records])
        return
    if not records:
        say(
            f"No overlays for {dataset!r} yet: make one with 'dsreg detect' "
            "or 'dsreg overlay import-votes'."
        )
        return
    rows = [
        [
            short(r.digest),
            r.overlay.kind,
            r.overlay.producer.get("name", ""),
            str(r.overlay.summary.get("rows", "")),
            short(r.overlay.base),
        ]
        for r in records
    ]
    out(table(rows, ["OVERLAY", "KIND", "PRODUCER", "ROWS", "SNAPSHOT"]))


@command(
    data_api.overlay_show,
    name="show",
)
def show(
    digest: str,
    *,
    rows: int,
    verdict: str | None,
    category: str | None,
    json: bool,
    **options: Any,
) -> None:
    """Show an overlay: manifest, summary and its first corrections."""
    info = data_api.overlay_show(digest, rows=rows, verdict=verdict, category=category, **options)
    if json_shown(info, json=json):
        return
    show_overlay(info)
    if not info.corrections and verdict is not None:
        say(f"No corrections with verdict {verdict!r} in this overlay.")
    if not info.corrections and category is not None:
        say(f"No corrections with category {printable(category)} in this overlay.")
    if info.total > rows:
        say(f"({info.total - rows} more; --rows N or --json)")


def show_overlay(info: OverlayInfo) -> None:
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

    # A version 2 or 4 overlay's label sets and raters' counts, as class names (labels;
    # label:count); a version 4 overlay's categories.
    sets = ov.version in (2, 4)
    categories = ov.version == 4

    def lists(r: dict[str, Any]) -> list[str]:
        if not sets:
            return []
        labels = r.get("labels")
        counts = r.get("label_counts")
        return [
            "" if labels is None else ";".join(name(i) for i in labels),
            "" if counts is None else ";".join(f"{name(c['label'])}:{c['count']}" for c in counts),
        ]

    rows = [
        [
            str(r["row"]),
            r["example_id"],
            name(r["given_label"]),
            name(r["suggested_label"]),
            r["verdict"],
            score(r["score"]),
            *lists(r),
            *([r.get("category") or ""] if categories else []),
        ]
        for r in info.corrections
    ]
    headers = ["ROW", "EXAMPLE", "GIVEN", "SUGGESTED", "VERDICT", "SCORE"]
    headers += ["LABELS", "RATERS"] if sets else []
    out(table(rows, headers + (["CATEGORY"] if categories else [])))

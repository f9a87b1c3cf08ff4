"""Overlay commands: detect, and overlay ls / show / import-votes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dsreg.cli._common import (
    CONTEXT,
    JsonOpt,
    RegistryOpt,
    command_line,
    emit_json,
    out,
    registry,
    say,
    table,
)
from dsreg.errors import InvalidInputError
from dsreg.objects.digest import short

overlay_app = typer.Typer(
    name="overlay",
    help="Label-correction overlays: list, show, import human validation votes.",
    context_settings=CONTEXT,
    no_args_is_help=True,
)

# Both overlay producers can tag a revision with the overlay they make.
TagOpt = Annotated[str | None, typer.Option(help="Also tag a revision with the new overlay.")]
ViewOpt = Annotated[str | None, typer.Option(help="With --tag: its view (default cleaned).")]
ForceOpt = Annotated[bool, typer.Option(help="With --tag: move it if it exists.")]

FILTERS = (
    "prune_by_noise_rate",
    "prune_by_class",
    "both",
    "confident_learning",
    "predicted_neq_given",
    "low_normalized_margin",
    "low_self_confidence",
)
RANKINGS = ("self_confidence", "normalized_margin", "confidence_weighted_entropy")


def register(app: typer.Typer) -> None:
    app.command(context_settings=CONTEXT)(detect)
    app.add_typer(overlay_app)


def _tag_after(
    reg: Any, spec: str, digest: str, tag: str | None, view: str | None, force: bool
) -> str | None:
    if tag is None:
        if view is not None:
            raise InvalidInputError("--view goes with --tag: it names the view of the new revision")
        return None
    from dsreg.ops.tag import make_tag

    dataset = reg.resolve(spec).dataset
    res = make_tag(
        reg,
        f"{dataset}@{tag}",
        spec,
        overlays=[digest],
        view=view or "cleaned",
        force=force,
        command=command_line(),
    )
    say(f"Tagged {dataset}@{tag} -> {short(res.revision)} [{res.view}]")
    return res.revision


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
        str, typer.Option(help="cleanlab's filter_by: " + ", ".join(FILTERS) + ".")
    ] = "prune_by_noise_rate",
    rank_by: Annotated[
        str, typer.Option(help="Label-quality score: " + ", ".join(RANKINGS) + ".")
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
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Find label issues with confident learning; store them as a 'detected' overlay."""
    from dsreg.overlays.create import detect_overlay

    if filter_by not in FILTERS:
        raise InvalidInputError(
            f"unknown --filter-by {filter_by!r}; choose one of {', '.join(FILTERS)}"
        )
    if rank_by not in RANKINGS:
        raise InvalidInputError(
            f"unknown --rank-by {rank_by!r}; choose one of {', '.join(RANKINGS)}"
        )
    per_class = None
    if num_to_remove_per_class is not None:
        try:
            per_class = [int(x) for x in num_to_remove_per_class.split(",")]
        except ValueError:
            raise InvalidInputError(
                f"--num-to-remove-per-class {num_to_remove_per_class!r} is not a list of integers"
            ) from None
    reg = registry(registry_path)
    options: dict[str, Any] = {
        "filter_by": filter_by,
        "rank_by": rank_by,
        "frac_noise": frac_noise,
        "num_to_remove_per_class": per_class,
        "min_examples_per_class": min_examples_per_class,
    }
    created = detect_overlay(reg, spec, pred_probs, options=options, command=command_line())
    tagged = _tag_after(reg, spec, created.digest, tag, view, force)
    det = created.details
    ranked = _ranked_rows(reg, created.digest, top)
    if json:
        emit_json({**created.to_dict(), "tagged": tagged, "top": ranked})
        return
    s = created.summary
    if s.get("renormalized_rows"):
        say(
            f"Note: {s['renormalized_rows']} rows of probabilities did not sum to 1 "
            "(within 1e-3) and were renormalised."
        )
    out(f"overlay        {created.digest}")
    out(f"flagged        {s['rows']} of {det.n} rows ({filter_by}, ranked by {rank_by})")
    out(f"noise rate     {s['noise_rate']:.4f} (estimated fraction of wrong labels)")
    out(f"estimate       {s['num_label_issues_estimate']} label issues (cleanlab num_label_issues)")
    if s["issues_per_class"]:
        out("per class      " + ", ".join(f"{k}: {v}" for k, v in s["issues_per_class"].items()))
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
                        f"{r['score']:.4f}",
                    ]
                    for r in ranked
                ],
                ["ROW", "EXAMPLE", "GIVEN", "SUGGESTED", "SCORE"],
            )
        )


def _ranked_rows(reg: Any, digest: str, top: int) -> list[dict[str, Any]]:
    from dsreg.repo.tables import read_corrections

    ov = reg.overlay(digest)
    classes = reg.snapshot(ov.base).classes
    t = read_corrections(reg, ov).to_pylist()
    t.sort(key=lambda r: (r["score"] if r["score"] is not None else float("inf"), r["row"]))
    return [
        {
            "row": r["row"],
            "example_id": r["example_id"],
            "given": classes[r["given_label"]],
            "suggested": classes[r["suggested_label"]]
            if r["suggested_label"] is not None
            else None,
            "score": r["score"],
        }
        for r in t[:top]
    ]


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
    from dsreg.overlays.create import votes_overlay

    if format not in ("label-errors", "csv"):
        raise InvalidInputError(f"unknown --format {format!r}; choose label-errors or csv")
    reg = registry(registry_path)
    created = votes_overlay(
        reg, spec, votes, format=format, threshold=threshold, command=command_line()
    )
    tagged = _tag_after(reg, spec, created.digest, tag, view, force)
    if json:
        emit_json({**created.to_dict(), "tagged": tagged})
        return
    s = created.summary
    out(f"overlay        {created.digest}")
    out(f"checked        {s.get('checked', s['rows'])}")
    out(f"errors         {s.get('errors', '')}")
    for v in ("non_error", "correctable", "multi_label", "neither", "non_agreement"):
        out(f"{v:<14} {s.get(v, 0)}")


@overlay_app.command("ls", context_settings=CONTEXT)
def ls(
    dataset: Annotated[str, typer.Argument(help="Dataset name.")],
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """List a dataset's overlays: digest, kind, producer, rows."""
    from dsreg.model.names import check_name
    from dsreg.overlays.write import list_overlays

    reg = registry(registry_path)
    check_name(dataset, what="dataset name")
    records = list_overlays(reg, dataset)
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
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Show an overlay: manifest, summary and its first corrections."""
    import json as _json

    from dsreg.repo.tables import read_corrections

    reg = registry(registry_path)
    d = reg.resolve_object(digest)
    ov = reg.overlay(d)
    corr = read_corrections(reg, ov)
    classes = reg.snapshot(ov.base).classes
    first = corr.slice(0, rows).to_pylist()
    if json:
        emit_json({"digest": d, "manifest": ov.to_dict(), "corrections": first})
        return
    out(f"overlay   {d}")
    out(f"kind      {ov.kind}" + (" (unvalidated)" if ov.kind == "detected" else ""))
    out(f"base      {ov.base} ({reg.snapshot(ov.base).dataset})")
    out(
        f"producer  {ov.producer['name']} {ov.producer['version']} "
        + _json.dumps(ov.producer["params"], sort_keys=True)
    )
    out(f"summary   {_json.dumps(ov.summary, sort_keys=True)}")
    out("")

    def name(i: int | None) -> str:
        return "" if i is None else classes[i]

    out(
        table(
            [
                [
                    str(r["row"]),
                    r["example_id"],
                    name(r["given_label"]),
                    name(r["suggested_label"]),
                    r["verdict"],
                    "" if r["score"] is None else f"{r['score']:.4f}",
                ]
                for r in first
            ],
            ["ROW", "EXAMPLE", "GIVEN", "SUGGESTED", "VERDICT", "SCORE"],
        )
    )
    if corr.num_rows > rows:
        say(f"({corr.num_rows - rows} more; --rows N or --json)")

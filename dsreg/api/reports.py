"""The reports on a revision: evaluate (with ``record=True``, a recorded result), diff, cite
and export."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeAlias

from dsreg._util.lazy import lazy_imports
from dsreg.api import reading
from dsreg.api.options import Arg, Opt, PathArg, ReadRemoteOpt, RegistryOpt, SeedOpt
from dsreg.errors import InvalidInputError
from dsreg.formats.manifests import VIEWS, View
from dsreg.views import verified

# Each of these imports numpy and pyarrow (DuckDB, matplotlib): imported when first used.
with lazy_imports():
    from dsreg.api import results as results_api
    from dsreg.remote import config as remote_config
    from dsreg.remote import transfer
    from dsreg.report import cite as report_cite
    from dsreg.report import diff as report_diff
    from dsreg.report import evaluate as report_evaluate
    from dsreg.report import labelexport
    from dsreg.report import plot as report_plot
    from dsreg.report.croissant import write as croissant_write
    from dsreg.report.publish import pinned
    from dsreg.report.stats import significance as report_significance

if TYPE_CHECKING:
    from dsreg.registry.reader import Resolved
    from dsreg.report.board.cite import ResultCitation
    from dsreg.report.cite import Citation
    from dsreg.report.diff import DiffResult
    from dsreg.report.evaluate import EvalReport
    from dsreg.report.labelexport import ExportResult
    from dsreg.report.predictions import Predictions
    from dsreg.report.publish.pinned import PinnedView

# What the command line cannot give (a DataFrame, an array): named, not imported, at run time.
PredictionsArg: TypeAlias = "Mapping[str, Predictions] | Sequence[PathArg] | Predictions"

# Every view by default; the help names them (decontaminated too, which an audit serves).
ViewsOpt: TypeAlias = Annotated[
    Sequence[View] | None,
    Opt(
        comma_list=str,
        help="Views to score, comma-separated (default: every view, "
        + ", ".join(VIEWS)
        + "; decontaminated leaves out the rows an audit overlay names).",
        show_default=False,
    ),
]
# eval: how the predictions are given (another tool's per-item output, aligned here).
PredictionsFormatOpt: TypeAlias = Annotated[
    str,
    Opt(
        "--predictions-format",
        help="How the predictions are given: dsreg (.npy, .parquet, .csv), or lm-eval "
        "(the samples_<task>_<date>.jsonl of lm_eval --log_samples, aligned with the rows "
        "by each doc's question and choices).",
    ),
]
# eval --record: what is kept beside the figures.
RecordOpt: TypeAlias = Annotated[
    bool,
    Opt(
        "--record",
        help="Keep the predictions (.npy, aligned with the snapshot's rows) in the registry "
        "for 'dsreg leaderboard'.",
    ),
]
ModelOpt: TypeAlias = Annotated[
    str | None, Opt(help="With --record: the model's name (default: file stem).")
]
MetaOpt: TypeAlias = Annotated[
    Mapping[str, str] | Sequence[str] | None,
    Opt(help="With --record: KEY=VALUE to keep; repeatable."),
]
RecordForceOpt: TypeAlias = Annotated[
    bool,
    Opt(
        "--force",
        help="With --record: replace a model recorded otherwise, or repair a damaged one.",
    ),
]

# export --to: where the view is pinned instead of written to a file.
PinToOpt: TypeAlias = Annotated[
    str | None,
    Opt(
        "--to",
        help="Instead of --output: pin the view's rows (Parquet) on this remote (a name, "
        "folder, ./site, or URL), named by their SHA-256, for any engine to read by URL.",
        show_default=False,
    ),
]


def check_record_remote(spec: str, *, record: bool, remote: str | None) -> None:
    """Refuse ``record`` with ``remote``: a result is recorded in a registry of one's own,
    and a remote is read in place (before anything is scored)."""
    if record and remote is not None:
        raise InvalidInputError(
            f"--record keeps predictions in a registry, and --remote {remote!r} reads {spec} in "
            "place: pull it first ('dsreg pull SPEC -r REMOTE'), then record without --remote"
        )


def evaluate(
    spec: Annotated[str, Arg("The revision; all views of its snapshot + overlays are scored.")],
    predictions: Annotated[
        PredictionsArg,
        Arg(
            "Predictions: .npy, .parquet or .csv; the model is the file stem.",
            cli_type=list[Path],
        ),
    ],
    *,
    predictions_format: PredictionsFormatOpt = "dsreg",
    views: ViewsOpt = VIEWS,
    top_k: Annotated[
        Sequence[int],
        Opt(
            "--top-k",
            comma_list=int,
            help="Top-k accuracies, e.g. 1,5 (k > 1 needs probabilities).",
        ),
    ] = (1,),
    plot: Annotated[
        PathArg | None, Opt(help="Write a slope chart of the ranks: FILE.png or FILE.svg.")
    ] = None,
    ci: Annotated[
        str, Opt(help="Accuracy intervals: wilson, or bootstrap (percentile).")
    ] = "wilson",
    resamples: Annotated[
        int, Opt(help="Bootstrap resamples (rank, difference and flip intervals).")
    ] = 1000,
    seed: SeedOpt = 0,
    record: RecordOpt = False,
    model: ModelOpt = None,
    meta: MetaOpt = None,
    force: RecordForceOpt = False,
    command: str | None = None,
    remote: ReadRemoteOpt = None,
    registry: RegistryOpt = None,
) -> EvalReport:
    """Score model predictions on the views of ``spec``'s snapshot and overlays (``views``,
    default every one: original, cleaned, corrected, honeypot, multilabel and decontaminated,
    the rows an audit overlay does not name); rank the models on each view.

    ``predictions``: ``{model: predictions}`` (a path, numpy array, Arrow table or pandas
    DataFrame) or a list of paths (the model is the file stem); ``predictions_format="lm-eval"``
    takes ``lm_eval --log_samples`` files on a question set (docs/llm.md). ``plot`` writes a
    slope chart of the ranks (``.png``, ``.svg``). ``ci``: ``wilson`` or ``bootstrap``; rank,
    difference and flip intervals bootstrap ``resamples`` resamples from ``seed``.
    ``PredictionsError`` if predictions miss rows, name unknown ids or classes, or misshape.

    ``record=True`` also keeps the predictions under ``model`` or each input's name, with
    ``meta``, for ``dsreg.leaderboard``: see ``dsreg.record``. With ``remote`` (no registry
    needed), ``spec`` is read from that remote, never its payloads (``record`` is refused).

    >>> report = dsreg.evaluate("cifar10-test@corrected-v1", {"resnet": probs})  # doctest: +SKIP
    >>> report.to_arrow()                     # one row per (model, view)
    """
    check_record_remote(spec, record=record, remote=remote)
    if plot is not None:  # a bad chart name or a missing extra, refused before --record writes
        report_plot.chart_format(plot)
    views = VIEWS if views is None else views
    with reading.reader(registry, remote) as reader:
        base = reader.revision(spec)
        # The tables are hashed on the other core while the report's libraries load.
        verified.prehash_revision(base.registry, base.revision)
        stats = report_significance.StatsOptions(ci=ci, resamples=resamples, seed=seed)
        given = reader.repairing(
            lambda: results_api.aligned_inputs(base, predictions, predictions_format)
        )
        inputs = report_evaluate.named_inputs(given)
        report = reader.repairing(
            lambda: report_evaluate.evaluate(base, inputs, views=views, top_k=top_k, stats=stats)
        )
        if record:
            recorded = results_api.record_resolved(
                base, given, model=model, meta=meta, force=force, command=command
            )
            report = dataclasses.replace(report, recorded=tuple(recorded))
    if plot is not None:
        report_plot.plot_ranks(report, plot)
    return report


def diff(
    a: Annotated[str, Arg("The first revision, e.g. cifar10-test@original.")],
    b: Annotated[str, Arg("The second revision, e.g. cifar10-test@corrected-v1.")],
    *,
    top: Annotated[
        int, Opt(help="How many example ids of each kind of change to list (0: none).")
    ] = 10,
    remote: ReadRemoteOpt = None,
    registry: RegistryOpt = None,
) -> DiffResult:
    """Rows only in ``a``, only in ``b``, and relabelled (with from -> to counts). Revisions of
    one snapshot are matched by row, of different snapshots by ``example_id``. ``samples``
    lists the first ``top`` example ids of each kind of change, in snapshot order. With
    ``remote`` (no registry needed), both are read from that remote, never their payloads."""

    with reading.reader(registry, remote) as reader:
        return reader.repairing(
            lambda: report_diff.diff(reader.revision(a), reader.revision(b), top=top)
        )


def cite(
    spec: Annotated[str, Arg("The revision to cite: dataset@tag or a digest.")],
    *,
    format: Annotated[str, Opt("--format", "-f", help="bibtex, cff or text.")] = "bibtex",
    authors: Annotated[
        Sequence[str] | None,
        Opt("--author", help="An author (person or organisation); repeat for several."),
    ] = None,
    remote: Annotated[
        str | None,
        Opt(
            "--remote",
            "-r",
            help="Where readers fetch it, and where it is read from: a remote's name or a URL "
            "(no registry needed). Default: the default remote, named and not contacted.",
        ),
    ] = None,
    model: Annotated[
        str | None,
        Opt(help="Cite this recorded model's result on the revision, with its figures."),
    ] = None,
    registry: RegistryOpt = None,
) -> Citation | ResultCitation:
    """A citation of ``spec``'s revision carrying the dataset, tag, year, full revision,
    snapshot and overlay digests, the URL of ``remote`` (a name, URL or path; default: the
    default remote, if any) with the ``dsreg checkout <digest> DIR --remote URL`` that fetches
    it on a fresh machine, the dataset creators' credit recorded at ``add``, and the dsreg
    version. ``str()`` of it is the text in ``format`` (``bibtex``, ``cff`` or ``text``). With
    ``remote`` given, the revision and its record (tags, log, label card) are read through
    that remote, as every read with a remote is (no registry needed; in a registry, a spec
    resolves there first); the default remote is named without being contacted. With
    ``model``, the citation of that model's result recorded on the revision
    (``dsreg.cite_result``): revision, result and predictions digests and the figures."""
    if model is not None:
        from dsreg.api.results import cite_result

        return cite_result(spec, model=model, remote=remote, registry=registry)
    report_cite.check_format(format)
    with reading.reader(registry, remote) as reader:
        url = remote_config.remote_url(reader.registry, remote)
        return reader.repairing(
            lambda: report_cite.cite(
                reader.revision(spec), authors=tuple(authors or ()), format=format, url=url
            )
        )


def export(
    spec: Annotated[str, Arg("The revision: dataset@tag or a digest.")],
    output: Annotated[
        PathArg | None, Opt("--output", "-o", help="The file to write.", show_default=False)
    ] = None,
    *,
    format: Annotated[
        str | None,
        Opt(
            "--format",
            "-f",
            help="npy, csv, parquet or jsonl (default: the output's suffix); croissant (a new "
            "folder: Croissant 1.1 JSON-LD and the files it describes) or datacite (DataCite "
            "JSON).",
        ),
    ] = None,
    align: Annotated[
        str,
        Opt(
            help="snapshot: one entry per snapshot row, -1 where the view removes it; "
            "view: the view's rows only."
        ),
    ] = "snapshot",
    authors: Annotated[
        Sequence[str] | None,
        Opt("--author", help="croissant, datacite: a creator; repeat for several (as cite)."),
    ] = None,
    to: PinToOpt = None,
    remote: ReadRemoteOpt = None,
    registry: RegistryOpt = None,
) -> ExportResult | PinnedView:
    """Write ``spec``'s labels to ``output`` as ``npy`` (an int64 vector; the label sets and
    raters' counts the revision carries as arrays beside it), ``csv``, ``parquet`` or ``jsonl``
    (``row, example_id, label, label_name``, then ``labels`` and ``label_counts`` as lists when
    it carries them); ``format`` defaults to the output's suffix. ``align="snapshot"``: one
    entry per snapshot row, label -1 (and no name) where the view removes the row;
    ``align="view"``: the view's rows only. Streamed in batches; the file appears whole or not
    at all.

    ``format="croissant"``: ``output`` is a new (or empty) folder that receives
    ``croissant.json``, the revision's Croissant 1.1 JSON-LD, and every file it describes (the
    view as ``labels.parquet``, the examples and corrections tables, the payloads), which
    ``mlcroissant`` reads back as ``dsreg.open(spec).labels()`` (docs/croissant.md).
    ``format="datacite"``: the DataCite JSON of a deposit of the revision. Both name
    ``authors`` as its creators (default: the dataset's maintainers).

    With ``to`` (a remote's name, a folder or a URL) instead of ``output``, the view's rows
    (``align="view"``, Parquet) are stored on that remote as ``views/sha256/<hex>.parquet``,
    once per revision: a second export uploads nothing. Returns a ``PinnedView`` with the
    object's URL and SHA-256. A read-only (http) remote is refused before anything is
    computed.

    With ``remote`` (a name, or a URL: no registry needed), ``spec`` is read through that
    remote: its manifests and tables, and its payloads for ``croissant``."""
    if to is not None and (output is not None or format not in (None, "parquet")):
        raise InvalidInputError(
            "--to pins the view as Parquet on a remote: give it without --output and with "
            "--format parquet (or none)"
        )
    if to is None and output is None:
        raise InvalidInputError("export needs --output FILE, or --to REMOTE to pin the view")
    fmt = "parquet" if output is None else labelexport.check_export_format(format, output)
    with reading.reader(registry, remote, payloads=fmt == "croissant") as reader:
        url = remote_config.remote_url(reader.registry, remote)
        return reader.repairing(
            lambda: _export(reader.revision(spec), output, fmt, to, align, authors, url)
        )


def _export(
    r: Resolved,
    output: PathArg | None,
    fmt: str,
    to: str | None,
    align: str,
    authors: Sequence[str] | None,
    url: str | None,
) -> ExportResult | PinnedView:
    """``export`` of revision ``r``; ``url`` is where readers fetch it (the remote it was read
    from, else the default remote)."""
    if to is not None:
        return pinned.pin_view(r, transfer.writable_remote(r.registry, to))
    assert output is not None
    if fmt == "croissant":
        return croissant_write.write_croissant(r, output, authors=tuple(authors or ()), url=url)
    if fmt == "datacite":
        return croissant_write.write_datacite(r, output, authors=tuple(authors or ()), url=url)
    return labelexport.export_labels(r, output, format=fmt, align=align)

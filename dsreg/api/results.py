"""Recorded results: ``dsreg eval --record``, ``dsreg leaderboard``, ``dsreg gap`` and
``dsreg cite --model``."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import dsreg.api.reading as reading
from dsreg.api.common import command_of, local_reader, options_of
from dsreg.api.options import Arg, Opt, PathArg, ReadRemoteOpt, RegistryArg, RegistryOpt, SeedOpt
from dsreg.registry.reader import tagged

if TYPE_CHECKING:
    from dsreg.registry.reader import Reader, Resolved
    from dsreg.registry.results import Recorded
    from dsreg.report.board.cite import ResultCitation
    from dsreg.report.board.gap import Gap
    from dsreg.report.board.leaderboard import Leaderboard
    from dsreg.report.board.multitask import MultitaskBoard, MultitaskOptions


def _arrays(predictions: Any, model: str | None) -> list[tuple[str, Any]]:
    """``(model, array or path)`` of what ``evaluate`` was given, named as it names them, or
    by ``model`` when there is one input."""
    if isinstance(predictions, Mapping):
        named = [(str(k), v) for k, v in predictions.items()]
    elif isinstance(predictions, str | os.PathLike):
        named = [(Path(predictions).stem, predictions)]
    elif isinstance(predictions, Sequence) and not isinstance(predictions, str | bytes):
        named = [(Path(p).stem, p) for p in predictions]
    else:
        named = [("model", predictions)]
    if model is not None:
        from dsreg.errors import PredictionsError

        if len(named) != 1:
            raise PredictionsError(
                f"--model {model!r} names one model, but {len(named)} predictions are given; "
                "record one at a time, or without --model (each under its file stem)"
            )
        named = [(model, named[0][1])]
    return named


def _load(obj: Any, model: str) -> Any:
    """An array from a numpy array, aligned predictions or a ``.npy`` path; tables are refused
    with the way out."""
    import numpy as np

    from dsreg.errors import PredictionsError
    from dsreg.formats.inputfiles import open_npy
    from dsreg.report.predictions import AlignedPredictions

    if isinstance(obj, AlignedPredictions):
        return obj.predictions
    if isinstance(obj, np.ndarray):
        return obj
    if isinstance(obj, str | os.PathLike) and Path(obj).suffix.lower() == ".npy":
        what = f"predictions file {str(obj)!r}"
        return open_npy(Path(obj), what=what, error=PredictionsError, hint="")
    if isinstance(obj, str | os.PathLike) and Path(obj).suffix.lower() == ".jsonl":
        raise PredictionsError(
            f"predictions of model {model!r} are a .jsonl file: give the samples of "
            "lm_eval --log_samples with --predictions-format lm-eval"
        )
    raise PredictionsError(
        f"predictions of model {model!r} are not a .npy file or a numpy array: a recorded "
        "result is aligned with the snapshot's rows; save them as a .npy array (row i predicts "
        "row i: class indices, or probabilities with one column per class)"
    )


def _meta(meta: Mapping[str, str] | Sequence[str] | None) -> dict[str, str] | None:
    """``meta`` as a dict: a mapping as given, ``KEY=VALUE`` texts split at their first ``=``;
    a one-line error naming the first malformed one."""
    if meta is None or isinstance(meta, Mapping):
        return None if meta is None else dict(meta)
    from dsreg.errors import InvalidInputError

    out: dict[str, str] = {}
    for item in meta:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise InvalidInputError(f"--meta {item!r}: give KEY=VALUE, e.g. --meta epochs=90")
        out[key.strip()] = value
    return out


def aligned_inputs(base: Resolved, predictions: Any, predictions_format: str) -> Any:
    """``predictions`` as ``evaluate`` and ``record`` take them: as given for ``dsreg``; for
    ``lm-eval``, ``{model: AlignedPredictions}``, each samples file (named as ``evaluate``
    names inputs) read and aligned with ``base``'s rows by its docs' question and choices."""
    from dsreg._util.choices import check_choice
    from dsreg.report import predictions as report_predictions

    check_choice(
        predictions_format, report_predictions.PREDICTION_FORMATS, option="--predictions-format"
    )
    if predictions_format == "dsreg":
        return predictions
    named = _arrays(predictions, None)
    for name, obj in named:
        if not isinstance(obj, str | os.PathLike):
            from dsreg.errors import PredictionsError

            raise PredictionsError(
                f"predictions of model {name!r} are a {type(obj).__name__}; --predictions-format "
                "lm-eval reads the samples file (.jsonl) lm_eval --log_samples writes"
            )
    texts = report_predictions.row_texts(base)
    return {name: report_predictions.lm_eval_predictions(base, path, texts) for name, path in named}


def record(
    spec: str,
    predictions: Any,
    *,
    model: str | None = None,
    meta: Mapping[str, str] | Sequence[str] | None = None,
    force: bool = False,
    predictions_format: str = "dsreg",
    command: str | None = None,
    registry: RegistryArg = None,
) -> list[Recorded]:
    """Record predictions (aligned with ``spec``'s snapshot) under their model names, as
    ``evaluate(..., record=True)`` does; every one is checked (values, shape, an existing
    record under its name) before any is recorded. ``meta``: a mapping, or ``KEY=VALUE`` texts.
    Each record keeps the BLAKE3 of the predictions as given (the file, or an array's ``.npy``
    bytes), the digest ``evaluate`` reports and ``cite --model`` cites.
    ``predictions_format="lm-eval"``: the samples files of ``lm_eval --log_samples``, whose
    answers are aligned with the rows by their docs' question and choices (docs/llm.md)."""
    base = local_reader(registry).revision(spec)
    given = aligned_inputs(base, predictions, predictions_format)
    return record_resolved(base, given, model=model, meta=meta, force=force, command=command)


def record_resolved(
    base: Resolved,
    predictions: Any,
    *,
    model: str | None = None,
    meta: Mapping[str, str] | Sequence[str] | None = None,
    force: bool = False,
    command: str | None = None,
) -> list[Recorded]:
    """``record`` of revision ``base``, resolved at the door (``evaluate(..., record=True)``
    records on the revision it scored)."""
    from dsreg.formats.inputfiles import aligned_predictions
    from dsreg.registry.results import prepare, record_result, refuse_conflict

    kept = _meta(meta)
    reg = base.registry
    snap = reg.snapshot(base.revision.snapshot)
    prepared = []
    for name, obj in _arrays(predictions, model):
        what = f"predictions of model {name!r}"
        given = _load(obj, name)
        arr = aligned_predictions(given, rows=snap.rows, classes=list(snap.classes), what=what)
        p = prepare(
            dataset=base.dataset,
            model=name,
            snapshot=base.revision.snapshot,
            predictions=arr,
            classes=len(snap.classes),
            meta=kept,
            source=_source(obj, given),
        )
        refuse_conflict(reg, p, force=force)
        prepared.append(p)
    line = command_of(command, "record", base.spec)
    return [record_result(reg, p, force=force, command=line) for p in prepared]


def _source(obj: Any, given: Any) -> str:
    """The BLAKE3 of predictions as given: a file's bytes, an aligned file's (kept when it was
    read), an array's ``.npy`` bytes."""
    from dsreg.objects.hashing import hash_file
    from dsreg.report.predictions import AlignedPredictions, array_digest

    if isinstance(obj, AlignedPredictions):
        return obj.digest
    return hash_file(obj) if isinstance(obj, str | os.PathLike) else array_digest(given)


PlotOpt = Annotated[PathArg | None, Opt(help="Also write a chart: FILE.png or FILE.svg.")]
# leaderboard --tasks: the datasets aggregated, what orders them, how many the report follows.
TasksOpt = Annotated[
    Sequence[str] | None,
    Opt(
        comma_list=str,
        help="Instead of DATASET: datasets (tasks), comma-separated, whose recorded models "
        "are aggregated by mean score, mean win rate and Borda count.",
    ),
]
RankByOpt = Annotated[
    str,
    Opt(
        help="With --tasks: the aggregate that orders models: win-rate (HELM's mean win "
        "rate), borda or score (mean accuracy)."
    ),
]
TopOpt = Annotated[
    int, Opt(help="With --tasks: the top models the stability report follows.", min=2)
]


def leaderboard(
    dataset: Annotated[
        str | None, Arg("The dataset whose recorded models to score (or --tasks).")
    ] = None,
    *,
    tasks: TasksOpt = None,
    revisions: Annotated[
        Sequence[str] | None,
        Opt(
            comma_list=str,
            help="Revisions to score, comma-separated tags (default: every tag); with --tasks, "
            "TASK@TAG for the tasks not scored at their latest tag.",
        ),
    ] = None,
    views: Annotated[
        Sequence[str] | None,
        Opt(
            comma_list=str,
            help="Views to score, comma-separated (default: original, cleaned, corrected, "
            "honeypot, and decontaminated when a revision applies an audit; with --tasks: "
            "original, corrected).",
        ),
    ] = None,
    resamples: Annotated[
        int, Opt(help="Bootstrap resamples of the rows for the rank intervals.", min=0)
    ] = 1000,
    seed: SeedOpt = 0,
    rank_by: RankByOpt = "win-rate",
    top: TopOpt = 5,
    plot: PlotOpt = None,
    remote: ReadRemoteOpt = None,
    registry: RegistryOpt = None,
) -> Leaderboard | MultitaskBoard:
    """Every model recorded for ``dataset`` scored on each of ``revisions`` (default: every
    tag, oldest first): accuracy with its 95% Wilson interval, rank with its bootstrap rank
    interval (``resamples`` resamples, the same for a ``seed``), and the pairs whose order
    flips between consecutive revisions, significant where McNemar's test (Holm-corrected)
    separates the pair on both. ``plot`` writes the ranks across revisions (.png or .svg).

    With ``tasks`` instead of ``dataset``, a ``MultitaskBoard``: the models recorded on several
    datasets, each at its latest tag (or the ``TASK@TAG`` of ``revisions``), aggregated on
    each view (default original and corrected) by mean score, mean win rate and Borda count,
    each with a bootstrap interval over items, and a stability report of the top ``top`` by
    ``rank_by`` (docs/llm.md); ``plot`` draws both.

    With ``remote`` (a name, or a URL or folder: no registry needed), the models recorded on
    that remote and its tags: records, predictions, manifests and tables are fetched and
    verified (never payloads), into the registry or the per-user cache."""
    if tasks is not None or dataset is None:
        from dsreg.report.board.multitask import MultitaskOptions

        options = options_of(MultitaskOptions, locals())
        return _multitask(dataset, tasks, revisions, options, plot, (remote, registry))
    from dsreg.report.board.leaderboard import leaderboard as do_leaderboard

    with reading.reader(registry, remote) as reader:
        board = reader.repairing(
            lambda: do_leaderboard(
                reader,
                dataset,
                tagged(reader, dataset, revisions or None),
                views=views,
                resamples=resamples,
                seed=seed,
            )
        )
    if plot is not None:
        from dsreg.report.board.plot import plot_leaderboard

        plot_leaderboard(board, plot)
    return board


def _task_revisions(
    reader: Reader, tasks: Sequence[str], revisions: Sequence[str] | None
) -> list[Resolved]:
    """Each task's revision: the ``TASK@TAG`` of ``revisions`` naming it, else its latest tag
    (the last ``tag_order`` gives); refused where a revision names no task."""
    from dsreg.errors import InvalidInputError, NotFoundError
    from dsreg.formats.names import parse_spec
    from dsreg.registry.reader import tag_order

    named: dict[str, str] = {}
    for spec in revisions or ():
        ds = parse_spec(spec).dataset if "@" in spec else None
        if ds is None or ds not in tasks or ds in named:
            raise InvalidInputError(
                f"--revisions {spec!r}: with --tasks, give TASK@TAG, once for each task of "
                f"{', '.join(tasks)} not scored at its latest tag"
            )
        named[ds] = spec
    out = []
    for task in tasks:
        if task not in named:
            order = tag_order(reader, task)
            if not order:
                raise NotFoundError(f"task {task!r} has no tags{reader.where}; tag a revision")
            named[task] = f"{task}@{order[-1]}"
        out.append(reader.revision(named[task]))
    return out


def _multitask(
    dataset: str | None,
    tasks: Sequence[str] | None,
    revisions: Sequence[str] | None,
    options: MultitaskOptions,
    plot: PathArg | None,
    where: tuple[str | None, RegistryArg],
) -> MultitaskBoard:
    """``leaderboard(tasks=...)``: the multitask board read where ``where`` (remote,
    registry) says, and its chart where ``plot`` asks."""
    from dsreg.errors import InvalidInputError
    from dsreg.report.board.multitask import multitask_leaderboard

    if dataset is not None or not tasks:
        raise InvalidInputError(
            "give a DATASET or --tasks T1,T2,... (several datasets to aggregate), not both"
            if dataset is not None
            else "give a DATASET, or --tasks T1,T2,... to aggregate several"
        )
    remote, registry = where
    with reading.reader(registry, remote) as reader:
        board = reader.repairing(
            lambda: multitask_leaderboard(
                reader, _task_revisions(reader, tasks, revisions), options
            )
        )
    if plot is not None:
        from dsreg.report.board.plot import plot_multitask

        plot_multitask(board, plot)
    return board


def gap(
    old: Annotated[str, Arg("The original test set: dataset@tag.")],
    new: Annotated[str, Arg("The new test set of the same classes: dataset@tag.")],
    *,
    view: Annotated[str, Opt(help="The view scored on each set.")] = "original",
    plot: PlotOpt = None,
    registry: RegistryOpt = None,
) -> Gap:
    """Each model recorded on both ``old`` and ``new`` (revisions of two datasets with the same
    classes): its accuracy on each with 95% Wilson intervals, the gap, and the linear fit of
    new against old accuracy (slope, intercept, R²), as Recht et al. (2019) report; ``plot``
    draws their Figure 1."""
    from dsreg.report.board.gap import gap as do_gap

    reader = local_reader(registry)
    res = do_gap(reader.revision(old), reader.revision(new), view=view)
    if plot is not None:
        from dsreg.report.board.plot import plot_gap

        plot_gap(res, plot)
    return res


def cite_result(
    spec: str, *, model: str, remote: str | None = None, registry: RegistryArg = None
) -> ResultCitation:
    """A citation of ``model``'s recorded result on ``spec``'s revision: the revision digest,
    the predictions' digest and the figures (accuracy with interval per view). With
    ``remote`` (a name, or a URL or folder: no registry needed), the result recorded on that
    remote and its revision, fetched and verified (never payloads)."""
    from dsreg.report.board.cite import cite_result as do_cite

    with reading.reader(registry, remote) as reader:
        return reader.repairing(lambda: do_cite(reader.revision(spec), model=model))

"""Recorded results: ``dsreg eval --record``, ``dsreg leaderboard``, ``dsreg gap`` and
``dsreg cite --model``."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import dsreg.api.reading as reading
from dsreg.api.common import command_of, local_reader
from dsreg.api.options import Arg, Opt, PathArg, ReadRemoteOpt, RegistryArg, RegistryOpt, SeedOpt
from dsreg.registry.reader import tagged

if TYPE_CHECKING:
    from dsreg.registry.reader import Resolved
    from dsreg.registry.results import Recorded
    from dsreg.report.board.cite import ResultCitation
    from dsreg.report.board.gap import Gap
    from dsreg.report.board.leaderboard import Leaderboard


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
    """An array from a numpy array or a ``.npy`` path; tables are refused with the way out."""
    import numpy as np

    from dsreg.errors import PredictionsError
    from dsreg.formats.inputfiles import open_npy

    if isinstance(obj, np.ndarray):
        return obj
    if isinstance(obj, str | os.PathLike) and Path(obj).suffix.lower() == ".npy":
        what = f"predictions file {str(obj)!r}"
        return open_npy(Path(obj), what=what, error=PredictionsError, hint="")
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


def record(
    spec: str,
    predictions: Any,
    *,
    model: str | None = None,
    meta: Mapping[str, str] | Sequence[str] | None = None,
    force: bool = False,
    command: str | None = None,
    registry: RegistryArg = None,
) -> list[Recorded]:
    """Record predictions (aligned with ``spec``'s snapshot) under their model names, as
    ``evaluate(..., record=True)`` does; every one is checked (values, shape, an existing
    record under its name) before any is recorded. ``meta``: a mapping, or ``KEY=VALUE`` texts.
    Each record keeps the BLAKE3 of the predictions as given (the file, or an array's ``.npy``
    bytes), the digest ``evaluate`` reports and ``cite --model`` cites."""
    base = local_reader(registry).revision(spec)
    return record_resolved(base, predictions, model=model, meta=meta, force=force, command=command)


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
    from dsreg.objects.hashing import hash_file
    from dsreg.registry.results import (
        aligned_predictions,
        prepare,
        record_result,
        refuse_conflict,
    )
    from dsreg.report.predictions import array_digest

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
            source=hash_file(obj) if isinstance(obj, str | os.PathLike) else array_digest(given),
        )
        refuse_conflict(reg, p, force=force)
        prepared.append(p)
    line = command or command_of("record", base.spec)
    return [record_result(reg, p, force=force, command=line) for p in prepared]


PlotOpt = Annotated[PathArg | None, Opt(help="Also write a chart: FILE.png or FILE.svg.")]


def leaderboard(
    dataset: Annotated[str, Arg("The dataset whose recorded models to score.")],
    *,
    revisions: Annotated[
        Sequence[str] | None,
        Opt(comma_list=str, help="Revisions to score, comma-separated tags (default: every tag)."),
    ] = None,
    views: Annotated[
        Sequence[str] | None,
        Opt(
            comma_list=str,
            help="Views to score, comma-separated (default: original, cleaned, corrected, "
            "honeypot, and decontaminated when a revision applies an audit).",
        ),
    ] = None,
    resamples: Annotated[
        int, Opt(help="Bootstrap resamples of the rows for the rank intervals.", min=0)
    ] = 1000,
    seed: SeedOpt = 0,
    plot: PlotOpt = None,
    remote: ReadRemoteOpt = None,
    registry: RegistryOpt = None,
) -> Leaderboard:
    """Every model recorded for ``dataset`` scored on each of ``revisions`` (default: every
    tag, oldest first): accuracy with its 95% Wilson interval, rank with its bootstrap rank
    interval (``resamples`` resamples, the same for a ``seed``), and the pairs whose order
    flips between consecutive revisions, significant where McNemar's test (Holm-corrected)
    separates the pair on both. ``plot`` writes the ranks across revisions (.png or .svg).

    With ``remote`` (a name, or a URL or folder: no registry needed), the models recorded on
    that remote and its tags: records, predictions, manifests and tables are fetched and
    verified (never payloads), into the registry or the per-user cache."""
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

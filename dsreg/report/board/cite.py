"""``dsreg cite DATASET@REV --model NAME``: a citation of a recorded result.

It names what a reader needs to reproduce the figures: the revision's digest (the labels), the
result record's digest, the predictions' digest (the BLAKE3 of the file given to ``dsreg eval
--record``, which ``dsreg eval`` printed; where dsreg stored them in another form, the stored
copy's digest too, and how it was derived), and the figures themselves, each view's top-1
accuracy with its 95% Wilson interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dsreg._version import __version__
from dsreg.errors import InvalidInputError
from dsreg.objects.digest import short
from dsreg.registry.reader import Resolved
from dsreg.registry.results import load_predictions
from dsreg.report._json import stable_json
from dsreg.report.board.leaderboard import BOARD_VIEWS, score_revision

__all__ = ["ResultCitation", "cite_result"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultCitation:
    """A recorded result on one revision, with its figures per view."""

    dataset: str
    tag: str | None
    revision: str
    snapshot: str
    model: str
    result: str
    predictions: str  # the BLAKE3 of the predictions as given
    kind: str
    meta: dict[str, str] = field(default_factory=dict)
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    stored: str | None = None  # the stored copy's digest, where it is another form
    dtype: str = ""  # the stored copy's dtype

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "tag": self.tag,
            "revision": self.revision,
            "snapshot": self.snapshot,
            "model": self.model,
            "result": self.result,
            "predictions": self.predictions,
            "stored_predictions": self.stored,
            "kind": self.kind,
            "meta": dict(self.meta),
            "figures": self.figures,
            "dsreg": __version__,
        }

    def to_json(self) -> str:
        return stable_json(self.to_dict())

    def __str__(self) -> str:
        at = f"{self.dataset}@{self.tag}" if self.tag else f"{self.dataset}@{short(self.revision)}"
        lines = [
            f"Model {self.model} on {at}",
            f"  revision     {self.revision}",
            f"  result       {self.result}",
            f"  predictions  {self.predictions}  ({self.kind}, the file as given)",
        ]
        if self.stored is not None:
            lines.append(
                f"  stored as    {self.stored}  (the same {self.kind} as {self.dtype} .npy, "
                "aligned with the snapshot's rows)"
            )
        lines += [
            "  check a file: 'b3sum FILE' prints the hex after 'blake3:' of its predictions",
            "               (in Python: blake3.blake3(open(FILE, 'rb').read()).hexdigest())",
        ]
        lines += [f"  meta         {k}={v}" for k, v in sorted(self.meta.items())]
        for view, f in self.figures.items():
            if not f["rows"]:
                lines.append(f"  {view:<12} no rows")
                continue
            lo, hi = f["interval"]
            lines.append(
                f"  {view:<12} top-1 {100 * f['accuracy']:.2f}% (95% CI {100 * lo:.2f}-"
                f"{100 * hi:.2f}%), {f['correct']} of {f['rows']} rows"
            )
        lines.append(f"  scored by dsreg {__version__}: dsreg cite {at} --model {self.model}")
        return "\n".join(lines) + "\n"


def cite_result(res: Resolved, *, model: str) -> ResultCitation:
    """Cite ``model``'s recorded result on revision ``res`` (of the snapshot it was recorded
    on), the result read by ``res``'s reader."""
    digest, rec = res.reader.result(res.dataset, model)
    reg = res.registry
    if rec.snapshot != res.revision.snapshot:
        raise InvalidInputError(
            f"model {model!r} was recorded on snapshot {short(rec.snapshot)}, and {res.spec} is a "
            f"revision of snapshot {short(res.revision.snapshot)}: cite a revision of the "
            "snapshot it was recorded on"
        )
    arr = np.asarray(load_predictions(reg, rec))
    board = score_revision(res, [(model, arr)], views=BOARD_VIEWS, resamples=0, seed=0)
    figures: dict[str, dict[str, Any]] = {
        v: f.model_dict(0) for v, f in zip(board.views, board.figures, strict=True)
    }
    for f in figures.values():
        del f["rank"], f["rank_interval"]
    return ResultCitation(
        dataset=res.dataset,
        tag=res.tag,
        revision=res.digest,
        snapshot=res.revision.snapshot,
        model=model,
        result=digest,
        predictions=rec.given,
        stored=rec.predictions if rec.source is not None else None,
        dtype=rec.dtype,
        kind=rec.kind,
        meta=dict(rec.meta),
        figures=figures,
    )

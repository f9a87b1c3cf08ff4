"""The text of ``dsreg eval``: accuracies with intervals and ranks with rank intervals (one line
per model and view, so the table stays within 100 columns whatever the number of views), rank
changes starred where the rank moves significantly (the footnote only then), a line per view on
its pairs, the honeypot's rank correlation, and with ``--full`` every pair and with
``--flip-points`` the flip points."""

from __future__ import annotations

import textwrap
from typing import Any, Final

import dsreg
from dsreg.cli._common import out, printable, say, table

__all__ = ["quality_lines", "render_eval"]

WIDTH: Final = 100

# Each stats view of the report and its label in the table.
_LABELS: Final = {
    "original": "ORIGINAL",
    "cleaned": "CLEANED",
    "corrected": "CORRECTED",
    "honeypot_given": "HONEYPOT given",
    "honeypot": "HONEYPOT corrected",
    "multilabel": "SET (multilabel)",
    "decontaminated": "DECONTAMINATED",
    "contaminated": "CONTAMINATED",
    "majority": "MAJORITY",
}
_CHANGES: Final = {
    ("original", "corrected"): "original -> corrected",
    ("honeypot_given", "honeypot"): "honeypot given -> corrected",
    ("original", "multilabel"): "original -> set",
    ("original", "majority"): "original -> majority",
    ("original", "decontaminated"): "original -> decontaminated",
}


def _line(text: str) -> None:
    """A line of prose, wrapped at 100 columns under its 10-column label."""
    out(textwrap.fill(text, WIDTH, subsequent_indent=" " * 10, break_on_hyphens=False))


def quality_lines(card: Any) -> list[str]:
    """A revision's label card (``label_quality``) as lines under a 10-column ``quality``
    label, each wrapped at 100 columns: what ``eval``, ``show`` and ``cite`` print."""
    if card is None:
        return []
    lines = []
    for i, text in enumerate(card.lines()):
        head = "quality   " if i == 0 else " " * 10
        lines += textwrap.wrap(head + text, WIDTH, subsequent_indent=" " * 12)
    return lines


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f}%"


def _ci(x: tuple[float, float] | None, scale: float = 100.0, digits: int = 2) -> str:
    return "-" if x is None else f"[{scale * x[0]:.{digits}f}, {scale * x[1]:.{digits}f}]"


def _ranks(x: tuple[float, float] | None) -> str:
    return "-" if x is None else f"[{x[0]:g}, {x[1]:g}]"


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def render_eval(report: dsreg.EvalReport, *, full: bool = False, flip_points: bool = False) -> None:
    at = f"{report.dataset}@{report.tag}" if report.tag else report.spec
    out(f"revision  {report.revision}  ({at})")
    out("rows      " + ", ".join(f"{v} {n}" for v, n in report.views.items()))
    for line in quality_lines(report.label_quality):
        out(line)
    sig = report.significance
    if sig is not None:
        how = "Wilson" if sig.options.ci == "wilson" else "bootstrap"
        out(
            f"stats     {100 * sig.options.level:g}% intervals: accuracy {how}, rank and "
            f"difference bootstrap ({sig.options.resamples} resamples, seed {sig.options.seed})"
        )
        out()
        out(table(*_accuracy_rows(report, sig, full=full)))
        _changes(report, sig)
        _pairs(sig, full=full)
        _correlation(sig)
        if flip_points:
            _flips(sig)
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


def _topk(report: dsreg.EvalReport, model: Any, view: str) -> list[str]:
    ks = [k for k in report.top_k if k > 1]
    score = model.scores.get(view)
    if score is None or view == "multilabel":
        return ["-" for _ in ks]
    return [_pct(score.accuracy(k)) for k in ks]


def _accuracy_rows(
    report: dsreg.EvalReport, sig: dsreg.Significance, *, full: bool
) -> tuple[list[list[str]], list[str]]:
    level = f"{100 * sig.options.level:g}%"
    headers = ["MODEL", "VIEW", "ACCURACY", f"{level} CI", "RANK", f"{level} RANK"]
    headers += [f"TOP-{k}" for k in report.top_k if k > 1]
    human = full and any(m.human is not None for m in report.models)
    if human:
        headers += ["AGREEMENT", "CROSS-ENTROPY"]
    shown = [v for v, vs in sig.views.items() if vs.rows]
    rows = []
    for m in report.models:
        for i, v in enumerate(shown):
            s = sig.views[v].models[m.model]
            r = [m.model if i == 0 else "", _LABELS.get(v, v), _pct(s.accuracy), _ci(s.interval)]
            r += [str(s.rank) if s.rank is not None else "-", _ranks(s.rank_interval)]
            r += _topk(report, m, v if v not in ("honeypot_given", "contaminated") else "")
            if human:
                h = m.human if v == "majority" else None
                r.append("" if h is None else _pct(h.expected_agreement))
                xent = None if h is None else h.cross_entropy
                r.append("" if xent is None else f"{xent:.4f}")
            rows.append(r)
    return rows, headers


def _move(change: Any) -> str:
    if change is None or change.before is None or change.after is None:
        return "-"
    d = change.change
    moved = f"{change.before} -> {change.after} ({f'{d:+d}' if d else '='})"
    return moved + ("*" if change.starred else "")


def _changes(report: dsreg.EvalReport, sig: dsreg.Significance) -> None:
    kinds = [k for k in _CHANGES if any((c.source, c.target) == k for c in sig.rank_changes)]
    audited = sig.views.get("contaminated")
    if audited is None or not audited.rows:  # no row left out: the two views are one
        kinds = [k for k in kinds if k != ("original", "decontaminated")]
    if not kinds:
        return
    headers = ["MODEL"] + [f"RANK {_CHANGES[k]}" for k in kinds]
    rows = [[m.model] + [_move(sig.rank_change(*k, m.model)) for k in kinds] for m in report.models]
    text = table(rows, headers)
    if max(len(line) for line in text.splitlines()) > WIDTH:
        # Too wide: one line per model and change.
        rows = [[m.model if i == 0 else "", _CHANGES[k], _move(sig.rank_change(*k, m.model))]
                for m in report.models for i, k in enumerate(kinds)]  # fmt: skip
        text = table(rows, ["MODEL", "RANK CHANGE", "RANKS"])
    out()
    out(text)
    if any(c.starred for c in sig.rank_changes if (c.source, c.target) in kinds):
        alpha = f"{sig.options.alpha:g}"
        _line(f"* significant: its rank moves and a pair it changes order with differs "
            f"significantly in both views (McNemar exact, Holm-corrected per view, "
            f"p < {alpha})")  # fmt: skip
    for k in kinds:
        orders = [c for c in sig.order_changes if (c.source, c.target) == k]
        if orders:
            firm = [f"{c.b} over {c.a}" for c in orders if c.significant]
            tail = f": {', '.join(firm)}" if firm else ""
            _line(f"order     {_CHANGES[k]}: {len(orders)} pair(s) change order, "
                f"{len(firm)} significant in both views{tail}")  # fmt: skip


def _pairs(sig: dsreg.Significance, *, full: bool) -> None:
    parts = [
        f"{v} {sum(p.significant for p in vs.pairs)} of {len(vs.pairs)}"
        for v, vs in sig.views.items()
        if vs.pairs
    ]
    if not parts:
        return
    _line(
        f"pairs     differing significantly (Holm p < {sig.options.alpha:g}): " + ", ".join(parts)
    )
    if not full:
        return
    rows = []
    for v, vs in sig.views.items():
        for p in vs.pairs:
            diff = "-" if p.difference is None else f"{100 * p.difference:+.2f}"
            rows.append([v, p.a, p.b, str(p.only_a), str(p.only_b), _p(p.p), _p(p.p_holm),
                         diff, _ci(p.difference_interval)])  # fmt: skip
    level = f"{100 * sig.options.level:g}%"
    out()
    out(table(rows, ["VIEW", "A", "B", "ONLY A", "ONLY B", "P", "P HOLM", "A-B", f"{level} CI"]))


def _correlation(sig: dsreg.Significance) -> None:
    c = sig.correlation
    if c is None:
        return
    _line(f"honeypot  rank correlation, given vs corrected labels ({c.models} models): Spearman "
        f"{c.spearman:+.2f} (p {_p(c.spearman_p)}), Kendall {c.kendall:+.2f} "
        f"(p {_p(c.kendall_p)})")  # fmt: skip
    if c.warning:
        say(
            "Warning: the models' ranks on the honeypot's given and corrected labels are "
            "significantly negatively correlated: the models may be overfitting the test set's "
            "label errors"
        )


def _flips(sig: dsreg.Significance) -> None:
    out()
    if sig.flip_views is None:
        _line("flip      flip points need the corrected and honeypot views")
        return
    if not sig.flip_points:
        _line("flip      no pair's order differs between the corrected labels and the corrected "
              "errors: no flip points")  # fmt: skip
        return
    level = f"{100 * sig.options.level:g}%"
    rows = [[f.a, f.b, _pct(f.removed), _ci(f.removed_interval), _pct(f.prevalence),
             _ci(f.prevalence_interval)] for f in sig.flip_points]  # fmt: skip
    _line("flip      B overtakes A once this share of the correctly labelled rows is removed "
        "at random (in expectation), at this noise prevalence")  # fmt: skip
    out(table(rows, ["A (leads)", "B", "REMOVED", f"{level} CI", "PREVALENCE", f"{level} CI"]))

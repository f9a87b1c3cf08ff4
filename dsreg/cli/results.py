"""Recorded results: leaderboard and gap, and what eval --record and cite --model print."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dsreg.api import results as results_api
from dsreg.cli._command import command
from dsreg.cli._common import json_shown, out, printable, say, short, table, write_json


def render_recorded(recorded: Sequence[Any]) -> None:
    """One line per model recorded by ``eval --record`` (on stderr: stdout is the report)."""
    for r in recorded:
        model = printable(r.model)
        if r.status == "unchanged":
            say(f"Model {model} is recorded already as result {short(r.digest)}: nothing to do")
        elif r.status == "repaired":
            say(f"Stored the damaged result {short(r.digest)} of model {model} again")
        elif r.status == "moved":
            say(f"Recorded model {model} as result {short(r.digest)} (was {short(r.old)})")
        else:
            say(f"Recorded model {model} as result {short(r.digest)}")


def render_citation(c: Any, *, json: bool) -> None:
    if json:
        write_json(c.to_json())
        return
    out(printable(str(c), "\n").rstrip("\n"))


def _cell(f: Any, i: int) -> str:
    """``93.1 (92.6-93.6) rank 2 [1-3]``: accuracy and Wilson interval in percent, rank and rank
    interval."""
    acc, iv = f.accuracy(i), f.intervals[i]
    if acc is None or iv is None:
        return "-"
    text = f"{100 * acc:.1f} ({100 * iv[0]:.1f}-{100 * iv[1]:.1f}) rank {int(f.ranks[i])}"
    ri = f.rank_intervals[i]
    if ri is not None:
        text += f" [{ri[0]:g}-{ri[1]:g}]"
    return text


def _render_board(board: Any) -> None:
    out(f"dataset  {board.dataset}  ({board.resamples} bootstrap resamples, seed {board.seed})")
    for b in board.revisions:
        out(f"revision {printable(b.name)}  {b.revision}")
    for view in board.views:
        shown = [b for b in board.revisions if b.figure(view).rows]
        if not shown:
            continue
        out()
        out(f"{view}: top-1 % (95% Wilson interval), rank [95% bootstrap interval]")
        rows = []
        for m in board.results:
            r = [printable(m)]
            for b in shown:
                r.append(_cell(b.figure(view), b.models.index(m)) if m in b.models else "-")
            rows.append(r)
        heads = [f"{printable(b.name)} ({b.figure(view).rows} rows)" for b in shown]
        out(table(rows, ["MODEL", *heads]))
    if board.flips:
        out()
        out("order flips between revisions (significant: McNemar, Holm-corrected, on both)")
        flips = [
            [f.view, f"{printable(f.before)} -> {printable(f.after)}",
             f"{printable(f.b)} overtakes {printable(f.a)}", "yes" if f.significant else "no"]
            for f in board.flips
        ]  # fmt: skip
        out(table(flips, ["VIEW", "REVISIONS", "FLIP", "SIGNIFICANT"]))


_AGGREGATE = {"win-rate": "mean win rate", "borda": "Borda count", "score": "mean score"}
_RELATION = {"ahead": ">", "tied": "=", "behind": "<"}


def _interval(value: float | None, iv: Any, fmt: str) -> str:
    """``0.812 (0.790-0.833)``: a value and its interval, ``-`` where there is none."""
    if value is None:
        return "-"
    return format(value, fmt) + ("" if iv is None else f" ({iv[0]:{fmt}}-{iv[1]:{fmt}})")


def _render_stability(st: Any) -> None:
    """The stability report of one view: the changes of each model left out or added, and how
    often each top pair keeps its order under resampling of the tasks."""
    top = ", ".join(map(printable, st.top))
    out(f"stability of the top {len(st.top)} by {_AGGREGATE[st.rank_by]}: {top}")

    def pair(c: Any, now: bool) -> str:
        rel = _RELATION[c.now if now else c.was]
        return f"{printable(c.a)} {rel} {printable(c.b)}"

    changes = [
        [p.change, printable(p.model),
         "; ".join(f"{pair(c, False)} becomes {pair(c, True)}" for c in p.changed)]
        for p in (*st.left_out, *st.added)
        if p.changed
    ]  # fmt: skip
    if changes:
        out(table(changes, ["", "MODEL", "PAIRS OF THE TOP THAT CHANGE ORDER"]))
    else:
        out("no model left out or added changes the order of a pair of the top models")
    if st.holds:
        kept = [
            [f"{printable(h.a)} {_RELATION[h.relation]} {printable(h.b)}", f"{h.holds:.2f}"]
            for h in st.holds
        ]
        out(table(kept, ["PAIR", f"ORDER KEPT IN {st.resamples} RESAMPLES OF THE TASKS"]))


def _render_tasks(board: Any) -> None:
    by = _AGGREGATE[board.rank_by]
    out(
        f"{len(board.tasks)} tasks, models ordered by {by} ({board.resamples} bootstrap "
        f"resamples, seed {board.seed})"
    )
    for t in board.tasks:
        sizes = ", ".join(f"{v} {n}" for v, n in t.rows.items())
        out(f"task {printable(t.name)}  {t.revision}  {len(t.models)} models, rows: {sizes}")
    for vb in board.boards:
        out()
        out(f"{vb.view}: mean score %, mean win rate, Borda count (95% bootstrap intervals)")
        rows = [
            [str(m.rank), printable(m.model), str(m.tasks),
             _interval(None if m.score is None else 100 * m.score,
                       None if m.score_interval is None else [100 * x for x in m.score_interval],
                       ".1f"),
             _interval(m.win_rate, m.win_rate_interval, ".3f"),
             _interval(m.borda, m.borda_interval, ".1f")]
            for m in vb.models
        ]  # fmt: skip
        out(table(rows, ["RANK", "MODEL", "TASKS", "SCORE %", "WIN RATE", "BORDA"]))
        _render_stability(vb.stability)


@command(
    results_api.leaderboard,
)
def leaderboard(dataset: str | None, *, plot: Path | None, json: bool, **options: Any) -> None:
    """Every model recorded with 'dsreg eval --record' scored on every tagged revision of
    DATASET: accuracy with its 95% interval, rank with its bootstrap rank interval, and the
    pairs of models whose order flips between revisions (significant or not). With --tasks
    instead of DATASET: the models aggregated over several datasets (mean score, mean win rate,
    Borda count, with bootstrap intervals) and how stable their order is."""
    from dsreg.api import MultitaskBoard

    board = results_api.leaderboard(dataset, plot=plot, **options)
    if plot is not None:
        kind = "multitask" if isinstance(board, MultitaskBoard) else "rank"
        say(f"Wrote the {kind} chart to {plot}")
    if json:
        write_json(board.to_json())
        return
    if isinstance(board, MultitaskBoard):
        _render_tasks(board)
    else:
        _render_board(board)


@command(
    results_api.gap,
)
def gap(old: str, new: str, *, plot: Path | None, json: bool, **options: Any) -> None:
    """Models recorded on two test sets of one task: accuracy on each with 95% intervals, the
    gap, and the linear fit of new against old accuracy (Recht et al. 2019, Figure 1)."""
    res = results_api.gap(old, new, plot=plot, **options)
    if plot is not None:
        say(f"Wrote the accuracy chart to {plot}")
    if json_shown(res, json=json):
        return
    out(f"old  {printable(res.old)}  {res.old_revision}")
    out(f"new  {printable(res.new)}  {res.new_revision}")

    def pct(d: dict[str, Any]) -> str:
        if d["accuracy"] is None:
            return "-"
        lo, hi = d["interval"]
        return f"{100 * d['accuracy']:.2f} ({100 * lo:.2f}-{100 * hi:.2f})"

    rows = [
        [printable(m.model), pct(m.old), pct(m.new), "-" if m.gap is None else f"{100 * m.gap:.2f}"]
        for m in res.models
    ]
    out(table(rows, ["MODEL", f"OLD {res.view} %", f"NEW {res.view} %", "GAP (points)"]))
    if res.slope is None or res.intercept is None or res.r2 is None:
        say("No linear fit: it needs two models or more with different old accuracies")
    else:
        out(f"fit  new = {res.slope:.3f} x old + {100 * res.intercept:.2f} points, "
            f"R² {res.r2:.3f}")  # fmt: skip

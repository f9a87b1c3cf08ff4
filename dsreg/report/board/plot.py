"""The charts of ``dsreg leaderboard --plot`` (one dataset, or ``--tasks``) and ``dsreg gap
--plot``.

The leaderboard's: one panel per view, each model a line through its rank on each revision
(oldest first; rank 1 at the top), with its bootstrap rank interval as an error bar, so a
re-ranking inside the bars is visibly noise. The gap's: Recht et al. (2019), Figure 1, each
model's new against old accuracy with Wilson intervals as error bars, ``y = x`` dashed and the
least-squares line. The multitask board's: per view, each model's aggregate (the board's
``rank_by``) with its bootstrap interval, best at the top, and beside it the share of task
resamples in which each pair of the top models keeps its order, so an order that resampling
the tasks overturns shows as a pale cell.
"""

from __future__ import annotations

import os
from pathlib import Path

from dsreg.errors import InvalidInputError
from dsreg.report.board.gap import Gap
from dsreg.report.board.leaderboard import Leaderboard
from dsreg.report.board.multitask import ModelAggregate, MultitaskBoard
from dsreg.report.plot import chart_format, pyplot, save_chart

__all__ = ["plot_gap", "plot_leaderboard", "plot_multitask"]


def plot_leaderboard(board: Leaderboard, path: str | os.PathLike[str]) -> Path:
    """Write the ranks of ``board``'s models across its revisions to ``path``."""
    if not board.revisions:
        raise InvalidInputError("nothing to plot: no revision has a recorded model")
    out, fmt = chart_format(path)
    plt = pyplot()
    views = [v for v in board.views if any(b.figure(v).rows for b in board.revisions)]
    models = list(board.results)
    fig, axes = plt.subplots(
        1, max(1, len(views)), figsize=(4.2 * max(1, len(views)), 1.8 + 0.35 * len(models)),
        squeeze=False,
    )  # fmt: skip
    xs = list(range(len(board.revisions)))
    for ax, view in zip(axes[0], views, strict=False):
        for m in models:
            pts = []
            for x, b in zip(xs, board.revisions, strict=True):
                if m in b.models and b.figure(view).rows:
                    f = b.figure(view)
                    i = b.models.index(m)
                    lo, hi = f.rank_intervals[i] or (f.ranks[i], f.ranks[i])
                    pts.append((x, int(f.ranks[i]), f.ranks[i] - lo, hi - f.ranks[i]))
            if not pts:
                continue
            line = ax.errorbar(
                [p[0] for p in pts], [p[1] for p in pts],
                yerr=[[p[2] for p in pts], [p[3] for p in pts]], fmt="-o", ms=4, capsize=3,
            )  # fmt: skip
            ax.annotate(
                m, (pts[-1][0], pts[-1][1]), textcoords="offset points", xytext=(8, -3),
                fontsize=7, color=line[0].get_color(),
            )  # fmt: skip
        ax.set_xticks(xs, [b.name for b in board.revisions], rotation=20, fontsize=7)
        ax.set_xlim(-0.3, len(xs) - 0.4)
        ax.set_ylim(len(models) + 0.8, 0.2)
        ax.set_ylabel("rank (95% bootstrap interval)")
        ax.set_title(view, fontsize=9)
        ax.grid(axis="y", color="#e0e0e0", lw=0.6)
    fig.suptitle(f"{board.dataset}: rank by top-1 accuracy across revisions", fontsize=9)
    fig.tight_layout()
    return save_chart(plt, fig, out, fmt)


def plot_gap(res: Gap, path: str | os.PathLike[str]) -> Path:
    """Write new against old accuracy of ``res``'s models to ``path``."""
    pts = [m for m in res.models if m.gap is not None]
    if not pts:
        raise InvalidInputError("nothing to plot: no model has rows on both sets")
    out, fmt = chart_format(path)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 5))
    x = [100 * m.old["accuracy"] for m in pts]
    y = [100 * m.new["accuracy"] for m in pts]
    xerr = [[a - 100 * m.old["interval"][0] for a, m in zip(x, pts, strict=True)],
            [100 * m.old["interval"][1] - a for a, m in zip(x, pts, strict=True)]]  # fmt: skip
    yerr = [[b - 100 * m.new["interval"][0] for b, m in zip(y, pts, strict=True)],
            [100 * m.new["interval"][1] - b for b, m in zip(y, pts, strict=True)]]  # fmt: skip
    ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", ms=4, capsize=2, color="tab:blue")
    lo, hi = min(x + y) - 2, max(x + y) + 2
    ax.plot([lo, hi], [lo, hi], "--", color="tab:gray", lw=1, label="y = x")
    if res.slope is not None and res.intercept is not None:
        fx = [lo, hi]
        fy = [100 * (res.slope * v / 100 + res.intercept) for v in fx]
        label = f"linear fit: slope {res.slope:.2f}, R² {res.r2:.2f}"
        ax.plot(fx, fy, "-", color="#d73027", lw=1.2, label=label)
    for m, a, b in zip(pts, x, y, strict=True):
        ax.annotate(m.model, (a, b), textcoords="offset points", xytext=(4, 4), fontsize=6)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel(f"{res.old} top-1 accuracy (%, {res.view})")
    ax.set_ylabel(f"{res.new} top-1 accuracy (%, {res.view})")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(color="#e0e0e0", lw=0.6)
    fig.tight_layout()
    return save_chart(plt, fig, out, fmt)


def _aggregate(m: ModelAggregate, by: str) -> tuple[float, tuple[float, float] | None]:
    """A model's value of aggregate ``by`` and its interval (NaN where it has none)."""
    if by == "score":
        return (m.score if m.score is not None else float("nan")), m.score_interval
    if by == "borda":
        return m.borda, m.borda_interval
    return (m.win_rate if m.win_rate is not None else float("nan")), m.win_rate_interval


def plot_multitask(board: MultitaskBoard, path: str | os.PathLike[str]) -> Path:
    """Write ``board``'s aggregates and its top models' stability to ``path``."""
    out, fmt = chart_format(path)
    plt = pyplot()
    rows = max(len(b.models) for b in board.boards)
    fig, axes = plt.subplots(
        len(board.boards), 2, figsize=(10, len(board.boards) * (1.6 + 0.22 * rows)),
        squeeze=False, gridspec_kw={"width_ratios": [3, 2]},
    )  # fmt: skip
    label = {"win-rate": "mean win rate", "borda": "Borda count", "score": "mean score"}
    for (left, right), vb in zip(axes, board.boards, strict=True):
        values = [_aggregate(m, board.rank_by) for m in vb.models]
        ys = list(range(len(vb.models)))
        x = [v for v, _ in values]
        err = [
            [v - (iv or (v, v))[0] for v, iv in values],
            [(iv or (v, v))[1] - v for v, iv in values],
        ]
        left.errorbar(x, ys, xerr=err, fmt="o", ms=4, capsize=2, color="tab:blue")
        left.set_yticks(ys, [m.model for m in vb.models], fontsize=7)
        left.set_ylim(len(ys) - 0.5, -0.5)
        left.set_xlabel(f"{label[board.rank_by]} (95% bootstrap interval over items)", fontsize=8)
        left.set_title(f"{vb.view}: {len(board.tasks)} tasks", fontsize=9)
        left.grid(axis="x", color="#e0e0e0", lw=0.6)
        st = vb.stability
        top = list(st.top)
        moved = {frozenset((c.a, c.b)) for p in (*st.left_out, *st.added) for c in p.changed}
        grid = [[float("nan")] * len(top) for _ in top]
        for h in st.holds:
            i, j = sorted((top.index(h.a), top.index(h.b)))
            grid[i][j] = h.holds
            mark = "*" if frozenset((h.a, h.b)) in moved else ""
            ink = "white" if h.holds > 0.6 else "black"
            right.text(
                j, i, f"{h.holds:.2f}{mark}", ha="center", va="center", fontsize=6, color=ink
            )
        right.imshow(grid, vmin=0, vmax=1, cmap="Blues")
        right.set_xticks(range(len(top)), top, rotation=30, fontsize=6)
        right.set_yticks(range(len(top)), top, fontsize=6)
        right.set_title(
            "top pairs: order kept under task resampling\n"
            "(* reordered when a model is left out or added)",
            fontsize=7,
        )
    fig.suptitle(f"models aggregated over {len(board.tasks)} tasks", fontsize=9)
    fig.tight_layout()
    return save_chart(plt, fig, out, fmt)

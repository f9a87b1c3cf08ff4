"""The charts of ``dsreg leaderboard --plot`` and ``dsreg gap --plot``.

The leaderboard's: one panel per view, each model a line through its rank on each revision
(oldest first; rank 1 at the top), with its bootstrap rank interval as an error bar, so a
re-ranking inside the bars is visibly noise. The gap's: Recht et al. (2019), Figure 1, each
model's new against old accuracy with Wilson intervals as error bars, ``y = x`` dashed and the
least-squares line.
"""

from __future__ import annotations

import os
from pathlib import Path

from dsreg.errors import InvalidInputError
from dsreg.report.board.gap import Gap
from dsreg.report.board.leaderboard import Leaderboard
from dsreg.report.plot import chart_format, pyplot, save_chart

__all__ = ["plot_gap", "plot_leaderboard"]


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

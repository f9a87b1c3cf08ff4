"""The rank slope chart of ``dsreg eval --plot``: each model a line from its rank on the original
labels to its rank on the cleaned and corrected labels, and on the honeypot from the given to the
corrected labels (Northcutt et al., NeurIPS 2021, Figure 2). Rank 1 is at the top; a line that
climbs is green, one that falls is red, one that stays is grey; a vertical bar through a point
is the model's bootstrap rank interval there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dsreg._util.extras import require
from dsreg._util.fs import replacing
from dsreg.errors import InvalidInputError, StorageError
from dsreg.report.evaluate import EvalReport

__all__ = ["chart_format", "plot_ranks", "pyplot", "save_chart"]

# ColorBrewer's RdYlGn green and red, and a neutral grey, as RGB fractions.
_UP = (26 / 255, 152 / 255, 80 / 255)
_DOWN = (215 / 255, 48 / 255, 39 / 255)
_SAME = (127 / 255, 127 / 255, 127 / 255)
_NOTE = (64 / 255, 64 / 255, 64 / 255)
_GAP_IN = 1.6  # inches between two columns of a panel


def _columns(report: EvalReport) -> list[tuple[str, list[tuple[str, str]]]]:
    """Panels, each a list of (column title, key) with key ``view`` or ``honeypot:given``."""
    main: list[tuple[str, str]] = [
        (v, v) for v in ("original", "cleaned", "corrected") if v in report.views
    ]
    if report.views.get("multilabel"):
        main.append(("set (multilabel)", "multilabel"))
    if any(m.human is not None for m in report.models):
        main.append(("raters' majority", "human:majority"))
    panels: list[tuple[str, list[tuple[str, str]]]] = []
    if len(main) >= 1:
        panels.append(("all rows", main))
    if report.views.get("honeypot"):
        panels.append(
            (
                f"honeypot ({report.views['honeypot']} corrected rows)",
                [("given", "honeypot:given"), ("corrected", "honeypot")],
            )
        )
    return panels


def _value(report: EvalReport, model: int, key: str) -> tuple[int | None, float | None]:
    m = report.models[model]
    if key == "human:majority":
        h = m.human
        return (None, None) if h is None else (h.rank, h.majority_accuracy)
    if key == "honeypot:given":
        s = m.scores["honeypot"]
        return s.given_rank, s.given_accuracy(1)
    s = m.scores[key]  # type: ignore[index]  # a view name, from _columns
    return s.rank, s.accuracy(1)


def _level(report: EvalReport) -> str:
    sig = report.significance
    return "95%" if sig is None else f"{100 * sig.options.level:g}%"


def _rank_interval(report: EvalReport, model: int, key: str) -> tuple[float, float] | None:
    """The bootstrap rank interval of a model at a column, if the report measured it."""
    sig = report.significance
    view = {"human:majority": "majority", "honeypot:given": "honeypot_given"}.get(key, key)
    if sig is None or view not in sig.views:
        return None
    stat = sig.views[view].models.get(report.models[model].model)
    return None if stat is None else stat.rank_interval


def chart_format(path: str | os.PathLike[str]) -> tuple[Path, str]:
    """``path`` and its format (``png`` or ``svg``); ``InvalidInputError`` for another, and
    ``MissingExtraError`` without the plot extra: a command checks its chart here before it
    reads or writes anything."""
    out = Path(path)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise InvalidInputError(f"--plot {str(out)!r}: give a file ending in .png or .svg")
    require("plot", "--plot", python=f"plot={str(out)!r}")
    return out, fmt


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend, set to write the same SVG bytes for the same
    chart (fixed hash salt; text stays text: searchable, selectable). Needs the plot extra
    (``chart_format`` checks it)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "dsreg"
    plt.rcParams["svg.fonttype"] = "none"
    return plt


def save_chart(plt: Any, fig: Any, out: Path, fmt: str) -> Path:
    """Write ``fig`` to ``out`` whole or not at all (fixed metadata), and close it."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        meta: dict[str, Any] = (
            {"Date": None, "Creator": "dsreg"} if fmt == "svg" else {"Software": "dsreg"}
        )
        with replacing(out) as f:  # no partial chart, even if interrupted
            fig.savefig(f, format=fmt, dpi=150, metadata=meta)
    except OSError as e:
        raise StorageError(f"cannot write {out}: {e.strerror}") from e
    finally:
        plt.close(fig)
    return out


def plot_ranks(report: EvalReport, path: str | os.PathLike[str]) -> Path:
    """Write the slope chart of ``report``'s ranks to ``path`` (``.png`` or ``.svg``)."""
    out, fmt = chart_format(path)
    panels = _columns(report)
    if not panels or not report.models:
        raise InvalidInputError("nothing to plot: score at least one model on at least one view")
    plt = pyplot()
    n = len(report.models)
    # Sized to the content: a fixed gap between columns, room for the longest name label on
    # either side, so labels never run into the axis or the next panel.
    groups = [_groups(report, cols) for _, cols in panels]
    longest = max(len(" = ".join(names)) for g in groups for names, _ in g.values())
    label_in = 0.3 + 0.075 * longest
    widths = [(len(cols) - 1) * _GAP_IN + 2 * label_in for _, cols in panels]
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(sum(widths) + 0.9 * len(panels), 1.6 + 0.42 * max(n, 3)),
        gridspec_kw={"width_ratios": widths},
        squeeze=False,
    )
    for ax, (title, cols), g in zip(axes[0], panels, groups, strict=True):
        _panel(ax, report, title, cols, g, pad=label_in / _GAP_IN)
    at = report.tag or report.revision[7:19]
    fig.suptitle(
        f"{report.dataset}@{at}: model rank by top-1 accuracy (1 = best; bars: "
        f"{_level(report)} bootstrap rank intervals)\n"
        f"revision {report.revision}",
        fontsize=9,
    )
    fig.tight_layout()
    return save_chart(plt, fig, out, fmt)


def _groups(
    report: EvalReport, cols: list[tuple[str, str]]
) -> dict[tuple[int, int], tuple[list[str], float | None]]:
    """(column, rank) -> the models there and their accuracy (tied ranks are tied accuracies)."""
    out: dict[tuple[int, int], tuple[list[str], float | None]] = {}
    for i, m in enumerate(report.models):
        for x, (_, key) in enumerate(cols):
            r, a = _value(report, i, key)
            if r is not None:
                out.setdefault((x, r), ([], a))[0].append(m.model)
    return out


def _panel(
    ax: Any,
    report: EvalReport,
    title: str,
    cols: list[tuple[str, str]],
    groups: dict[tuple[int, int], tuple[list[str], float | None]],
    *,
    pad: float,
) -> None:
    n = len(report.models)
    xs = list(range(len(cols)))
    for i in range(n):
        pts = [(x, _value(report, i, key)[0]) for x, (_, key) in zip(xs, cols, strict=True)]
        have = [(x, r) for x, r in pts if r is not None]
        if not have:
            continue
        first, last = have[0][1], have[-1][1]
        color = _SAME if first == last else (_UP if last < first else _DOWN)
        ax.plot([p[0] for p in have], [p[1] for p in have], "-o", color=color, lw=2, ms=6)
        # Error bars: the bootstrap rank interval, models side by side so bars do not overlap.
        shift = (i - (n - 1) / 2) * min(0.04, 0.3 / max(n, 1))
        for x, (_, key) in zip(xs, cols, strict=True):
            ci = _rank_interval(report, i, key)
            if ci is not None and ci[0] != ci[1]:
                ax.vlines(x + shift, ci[0], ci[1], color=color, lw=1.2, alpha=0.55)
    for (x, r), (names, a) in groups.items():
        if a is not None:
            ax.annotate(
                f"{100 * a:.1f}%", (x, r), textcoords="offset points", xytext=(0, 7),
                ha="center", fontsize=7, color=_NOTE,
            )  # fmt: skip
        # Names beside the first and last columns; tied models share one label.
        label = " = ".join(names)
        if x == xs[0]:
            ax.annotate(
                label, (x, r), textcoords="offset points", xytext=(-10, -3), ha="right",
                fontsize=8,
            )  # fmt: skip
        if x == xs[-1] and len(xs) > 1:
            ax.annotate(
                label, (x, r), textcoords="offset points", xytext=(10, -3), ha="left",
                fontsize=8,
            )  # fmt: skip
    ax.set_xticks(xs, [c for c, _ in cols])
    ax.set_xlim(-pad, len(cols) - 1 + pad)
    ax.set_ylim(n + 0.6, 0.4)
    ax.set_yticks(range(1, n + 1))
    ax.set_ylabel("rank")
    ax.set_title(title, fontsize=9)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.grid(axis="y", color="#e0e0e0", lw=0.6)

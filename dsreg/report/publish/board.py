"""The leaderboard as the published pages show it: each recorded model's rank on each tag, in
the tag's own view, drawn as the rank chart ``dsreg eval --plot`` draws (each model a line
through its ranks, rank 1 at the top, a climb green, a fall red, a level grey; a bar through a
point is the model's 95% bootstrap rank interval there) and listed as a table, where a rank
that moves against the first tag (the original, before any relabeling) is starred when the
move is significant (``report.stats.significance.starred``: the one rule), with the footnote
only when a star is shown.

The chart is SVG written here, not by matplotlib: the page is then the same bytes wherever it
is published (matplotlib is an optional extra, and its SVG changes with its version), its
words are text (selectable, found by search, escaped as every text of the site), and it sits
inline in the page, which still loads nothing from elsewhere. ``tests/publish`` parses it and
checks each point against the leaderboard's ranks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dsreg.report.publish import html as h
from dsreg.report.stats.significance import starred

__all__ = ["BoardColumn", "board_columns", "board_table", "rank_chart", "score_cell"]

# ColorBrewer's RdYlGn green and red and a neutral grey, as ``report/plot.py`` draws them.
_UP = "rgb(26, 152, 80)"
_DOWN = "rgb(215, 48, 39)"
_SAME = "rgb(127, 127, 127)"
_TEXT = "rgb(29, 35, 42)"
_NOTE = "rgb(64, 64, 64)"
_GRID = "rgb(224, 224, 224)"
_ROW = 34  # px between two ranks
_GAP = 170  # px between two tags
_TOP = 48  # px above rank 1: the tags' names and views
Point = tuple[float, float]
_CHAR = 7.0  # px a character of a 12 px label takes, at most, in the fonts the page names


@dataclass(frozen=True, slots=True, kw_only=True)
class BoardColumn:
    """One tag on the leaderboard: its name and view, and what the leaderboard scored there:
    per model its score (``rows``, ``correct``, ``accuracy``, ``interval``, ``rank``,
    ``rank_interval``) and the view's pairs with their Holm-corrected significance."""

    tag: str
    view: str
    scores: dict[str, dict[str, Any]]
    pairs: tuple[dict[str, Any], ...]

    def score(self, model: str) -> dict[str, Any] | None:
        s = self.scores.get(model)
        return s if s and s.get("accuracy") is not None else None

    def rank(self, model: str) -> int | None:
        s = self.score(model)
        return None if s is None else s.get("rank")

    def _lead(self, a: str, b: str) -> int:
        x, y = int(self.scores[a]["correct"]), int(self.scores[b]["correct"])
        return (x > y) - (x < y)

    def _significant(self, a: str, b: str) -> bool:
        return any({p["a"], p["b"]} == {a, b} and p["significant"] for p in self.pairs)

    def starred(self, first: BoardColumn, model: str) -> bool:
        """Whether ``model``'s rank here is starred against ``first``: it moves, and a model
        it changes order with differs from it significantly on both."""
        if self.score(model) is None or first.score(model) is None:
            return False
        others = [m for m in self.scores if m != model and self.score(m) and first.score(m)]
        significant = any(
            first._lead(model, o) != self._lead(model, o)
            and first._significant(model, o)
            and self._significant(model, o)
            for o in others
        )
        return starred(first.rank(model), self.rank(model), significant=significant)


def board_columns(board: dict[str, Any], tags: Sequence[tuple[str, str, str]]) -> list[BoardColumn]:
    """The columns of ``board`` (``Leaderboard.to_dict()``) for ``tags``, each ``(tag,
    revision digest, view)`` in order; a tag whose revision the board did not score is left
    out."""
    by_revision = {r["revision"]: r for r in board["revisions"]}
    out = []
    for tag, digest, view in tags:
        r = by_revision.get(digest)
        if r is None:
            continue
        scores = {m: v[view] for m, v in r["scores"].items() if view in v}
        out.append(
            BoardColumn(tag=tag, view=view, scores=scores, pairs=tuple(r["pairs"].get(view, ())))
        )
    return out


def score_cell(board_rev: dict[str, Any], model: str, view: str) -> str:
    """A model's accuracy on one revision's view: percent, 95% interval and rank."""
    s = board_rev["scores"].get(model, {}).get(view)
    return "" if not s or s.get("accuracy") is None else h.esc(_score_text(s))


def _score_text(s: dict[str, Any]) -> str:
    lo, hi = s["interval"]
    return f"{100 * s['accuracy']:.2f}% [{100 * lo:.1f}, {100 * hi:.1f}] #{s['rank']}"


def board_table(cols: Sequence[BoardColumn], models: Sequence[str]) -> str:
    """Each model's accuracy, interval and rank on each column; a rank that moves against the
    first column significantly is starred, and the footnote says so when one is."""
    first = cols[0]
    rows = []
    stars = 0
    for m in models:
        cells = [h.esc(m)]
        for i, c in enumerate(cols):
            s = c.score(m)
            star = i > 0 and c.starred(first, m)
            stars += star
            cells.append("" if s is None else h.esc(_score_text(s) + ("*" if star else "")))
        rows.append(cells)
    table = h.table(
        ["Model", *(f"{c.tag} ({c.view})" for c in cols)], rows, numeric=len(cols),
        label="Leaderboard",
    )  # fmt: skip
    if not stars:
        return table
    return table + (
        '<p class="muted" id="board-note">* Its rank moves against '
        f"{h.esc(first.tag)}, and a model it changes order with differs from it significantly "
        "on both tags (McNemar exact, Holm-corrected per tag, p &lt; 0.05).</p>"
    )


# -- the chart -----------------------------------------------------------------------------------


def _color(before: int, after: int) -> str:
    return _SAME if before == after else (_UP if after < before else _DOWN)


def _groups(cols: Sequence[BoardColumn], models: Sequence[str]) -> dict[tuple[int, int], list[str]]:
    """(column, rank) -> the models there (tied models share a point and a label)."""
    out: dict[tuple[int, int], list[str]] = {}
    for x, c in enumerate(cols):
        for m in models:
            r = c.rank(m)
            if r is not None:
                out.setdefault((x, r), []).append(m)
    return out


def _text(x: float, y: float, text: str, *, anchor: str = "middle", size: int = 12,
          color: str = _TEXT, weight: str = "normal") -> str:  # fmt: skip
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" '
        f'font-weight="{weight}" fill="{color}">{h.esc(text)}</text>'
    )


def _line(x1: float, y1: float, x2: float, y2: float, color: str, width: float) -> str:
    return (
        f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}" '
        f'stroke-width="{width:g}" stroke-linecap="round"/>'
    )


def rank_chart(cols: Sequence[BoardColumn], models: Sequence[str], *, title: str) -> str:
    """The SVG of the models' ranks across ``cols`` (module docstring); its ``<title>`` is
    ``title`` and its ``<desc>`` says each model's ranks in words."""
    n = max(1, len(models))
    groups = _groups(cols, models)
    left = {r: " = ".join(ms) for (x, r), ms in groups.items() if x == 0}
    right = {r: " = ".join(ms) for (x, r), ms in groups.items() if x == len(cols) - 1}
    pad_l = 24 + _CHAR * max((len(t) for t in left.values()), default=4)
    pad_r = 24 + _CHAR * max((len(t) for t in right.values()), default=4)
    width = pad_l + _GAP * (len(cols) - 1) + pad_r
    height = _TOP + _ROW * n + 12

    def at(x: int, rank: float) -> Point:
        return pad_l + _GAP * x, _TOP + _ROW * (rank - 0.5)

    parts = []
    for r in range(1, n + 1):
        y = at(0, r)[1]
        parts.append(_line(pad_l - 8, y, pad_l + _GAP * (len(cols) - 1) + 8, y, _GRID, 1))
    for x, c in enumerate(cols):
        cx = at(x, 1)[0]
        parts.append(_text(cx, 18, c.tag, weight="600"))
        parts.append(_text(cx, 34, f"({c.view})", size=11, color=_NOTE))
    parts += _model_lines(cols, models, at)
    for (x, r), ms in sorted(groups.items()):
        cx, cy = at(x, r)
        acc = cols[x].score(ms[0])
        star = "*" if x > 0 and any(cols[x].starred(cols[0], m) for m in ms) else ""
        if acc is not None:
            label = f"{100 * acc['accuracy']:.1f}%{star}"
            parts.append(_text(cx, cy - 9, label, size=10, color=_NOTE))
        if x == 0:
            parts.append(_text(cx - 12, cy + 4, left[r], anchor="end"))
        if x == len(cols) - 1 and len(cols) > 1:
            parts.append(_text(cx + 12, cy + 4, right[r], anchor="start"))
    desc = "; ".join(
        f"{m}: " + ", ".join(f"rank {c.rank(m) or '-'} on {c.tag}" for c in cols) for m in models
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="rank-chart" width="{width:.0f}" '
        f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
        'aria-labelledby="rank-chart-title rank-chart-desc" '
        'font-family="system-ui, sans-serif">'
        f'<title id="rank-chart-title">{h.esc(title)}</title>'
        f'<desc id="rank-chart-desc">{h.esc(desc)}</desc>' + "".join(parts) + "</svg>"
    )


def _model_lines(
    cols: Sequence[BoardColumn], models: Sequence[str], at: Callable[[int, float], Point]
) -> list[str]:
    """Each model's segments, rank interval bars and points (``data-model``, ``data-tag`` and
    ``data-rank`` on each point: what a test, or a reader's tool, reads back)."""
    out = []
    n = len(models)
    for i, m in enumerate(models):
        shift = (i - (n - 1) / 2) * min(4.0, 24.0 / max(n, 1))
        ranks = [c.rank(m) for c in cols]
        for x in range(1, len(cols)):
            a, b = ranks[x - 1], ranks[x]
            if a is not None and b is not None:
                (x1, y1), (x2, y2) = at(x - 1, a), at(x, b)
                out.append(_line(x1, y1, x2, y2, _color(a, b), 2.5))
        for x, c in enumerate(cols):
            s = c.score(m)
            if s is None:
                continue
            cx, cy = at(x, s["rank"])
            ri = s.get("rank_interval")
            if ri is not None and ri[0] != ri[1]:
                top, bottom = at(x, ri[0])[1], at(x, ri[1])[1]
                out.append(_line(cx + shift, top, cx + shift, bottom, _NOTE, 1.5))
            out.append(
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4.5" fill="{_TEXT}" '
                f'data-model="{h.esc(m)}" data-tag="{h.esc(c.tag)}" data-rank="{s["rank"]}"/>'
            )
    return out

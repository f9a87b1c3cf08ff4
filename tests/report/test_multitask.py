"""``dsreg leaderboard --tasks``: models aggregated over several datasets (docs/llm.md).

The aggregates are checked against a plain computation (loops over tasks and models, the way
the definitions read), on original and re-annotated labels; the bootstrap's vectorised
aggregation against the same loops on every resample; and the stability report on a field
built so that adding one weak model must reorder the top two."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsreg
from dsreg import Registry
from dsreg.errors import InvalidInputError, NotFoundError
from dsreg.formats.corrections import corrections_table
from dsreg.overlays.write import write_overlay
from dsreg.report.board.aggregate import ViewCounts, over_tasks, per_task
from dsreg.report.board.stability import stability

PRODUCER = {"name": "test", "version": "1", "params": {}, "inputs": {}}
CLASSES = ("a", "b", "c", "d")


def _add(reg: Registry, name: str, labels: np.ndarray, folder: Path) -> None:
    path = folder / f"{name}.parquet"
    ids = [f"{name}-{i}" for i in range(len(labels))]
    pq.write_table(pa.table({"example_id": ids, "label": pa.array(labels)}), path)
    dsreg.add(name, table=path, classes=CLASSES, tag="original", registry=reg)


def _relabel(reg: Registry, name: str, labels: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Tag ``<name>@redux``: ``rows`` corrected to the next class; the corrected labels."""
    snap = dsreg.show(f"{name}@original", registry=reg).snapshot
    sug = (labels[rows] + 1) % len(CLASSES)
    table = corrections_table(
        rows=rows,
        example_ids=[f"{name}-{r}" for r in rows],
        given_label=labels[rows],
        suggested_label=sug,
        verdict=["correctable"] * len(rows),
    )
    d = write_overlay(reg, base=snap, kind="manual", table=table, producer=PRODUCER)
    dsreg.tag(f"{name}@redux", f"{name}@original", overlays=[d], view="corrected", registry=reg)
    out = labels.copy()
    out[rows] = sug
    return out


def _plain(correct: np.ndarray, rows: np.ndarray, present: np.ndarray) -> dict[str, np.ndarray]:
    """The aggregates as the definitions read, one task and one model at a time."""
    tasks, models = correct.shape
    score = np.full(models, np.nan)
    rate = np.full(models, np.nan)
    borda = np.zeros(models)
    for m in range(models):
        scores, rates = [], []
        for t in range(tasks):
            if not present[t, m] or rows[t] == 0:
                continue
            others = [o for o in range(models) if o != m and present[t, o]]
            beaten = sum(correct[t, m] > correct[t, o] for o in others)
            tied = sum(correct[t, m] == correct[t, o] for o in others)
            scores.append(correct[t, m] / rows[t])
            borda[m] += beaten + tied / 2
            if others:
                rates.append((beaten + tied / 2) / len(others))
        score[m] = np.mean(scores) if scores else np.nan
        rate[m] = np.mean(rates) if rates else np.nan
    return {"score": score, "win-rate": rate, "borda": borda}


@pytest.fixture
def five_tasks(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> tuple[Registry, dict[str, Any]]:
    """Five tasks of 40 to 120 rows, eight models recorded on each but ``m7`` (not on the last
    task); every task re-annotated (``redux``) on a third of its rows."""
    reg = make_registry()
    rng = np.random.default_rng(7)
    truth: dict[str, Any] = {"original": {}, "corrected": {}, "preds": {}}
    for t in range(5):
        name = f"task{t}"
        n = int(rng.integers(40, 121))
        labels = rng.integers(0, 4, n).astype(np.int32)
        _add(reg, name, labels, tmp_path)
        preds = {}
        for m in range(8):
            if m == 7 and t == 4:
                continue
            skill = 0.3 + 0.08 * m
            p = np.where(rng.random(n) < skill, labels, rng.integers(0, 4, n)).astype(np.int32)
            dsreg.record(f"{name}@original", p, model=f"m{m}", registry=reg)
            preds[f"m{m}"] = p
        rows = np.sort(rng.choice(n, size=n // 3, replace=False))
        truth["original"][name] = labels
        truth["corrected"][name] = _relabel(reg, name, labels, rows)
        truth["preds"][name] = preds
    return reg, truth


def test_multitask_aggregation_equals_a_plain_computation(
    five_tasks: tuple[Registry, dict[str, Any]],
) -> None:
    reg, truth = five_tasks
    tasks = [f"task{t}" for t in range(5)]
    board = dsreg.leaderboard(tasks=tasks, resamples=200, registry=reg)
    assert isinstance(board, dsreg.MultitaskBoard)
    assert [t.name for t in board.tasks] == [f"{t}@redux" for t in tasks]  # the latest tags
    models = [f"m{m}" for m in range(8)]
    for view in ("original", "corrected"):
        correct = np.zeros((5, 8))
        present = np.zeros((5, 8), dtype=bool)
        rows = np.array([len(truth[view][t]) for t in tasks])
        for t, task in enumerate(tasks):
            for m, name in enumerate(models):
                pred = truth["preds"][task].get(name)
                if pred is not None:
                    correct[t, m] = int((pred == truth[view][task]).sum())
                    present[t, m] = True
        want = _plain(correct, rows, present)
        got = {m.model: m for m in board.board(view).models}
        for m, name in enumerate(models):
            assert got[name].tasks == int(present[:, m].sum())
            assert got[name].score == pytest.approx(want["score"][m], abs=1e-12)
            assert got[name].win_rate == pytest.approx(want["win-rate"][m], abs=1e-12)
            assert got[name].borda == pytest.approx(want["borda"][m], abs=1e-12)
            for value, iv in ((got[name].score, got[name].score_interval),
                              (got[name].win_rate, got[name].win_rate_interval)):  # fmt: skip
                assert iv is not None and iv[0] <= iv[1]
                assert iv[0] - 0.2 < value < iv[1] + 0.2  # an interval around its estimate
        ranked = [m.model for m in board.board(view).models]
        by_rate = sorted(models, key=lambda n: (-want["win-rate"][models.index(n)], n))
        assert ranked == by_rate  # ordered by mean win rate, ties by name
    # The re-annotation moves the scores: the corrected view is scored on corrected labels.
    assert board.board("original").models != board.board("corrected").models


def test_resampled_aggregates_equal_the_plain_computation_on_each_resample() -> None:
    """The vectorised per-task figures over a stack of resamples (ties, absent models, a
    resample that drew no row of a task) equal the loops, resample by resample."""
    rng = np.random.default_rng(3)
    resamples, tasks, models = 40, 6, 9
    rows = rng.integers(0, 6, (resamples, tasks))
    rows[0, 2] = 0
    correct = np.minimum(rng.integers(0, 6, (resamples, tasks, models)), rows[..., None])
    present = rng.random((tasks, models)) < 0.8
    agg = over_tasks(per_task(correct, rows, present))
    for b in range(resamples):
        want = _plain(correct[b], rows[b], present)
        np.testing.assert_allclose(agg.score[b], want["score"], atol=1e-12)
        np.testing.assert_allclose(agg.win_rate[b], want["win-rate"], atol=1e-12)
        np.testing.assert_allclose(agg.borda[b], want["borda"], atol=1e-12)


def _weak_field() -> tuple[list[str], ViewCounts]:
    """Models A and B on five tasks of 100 rows: A leads on three, B on two. Weak model W
    falls between B and A wherever B leads, and below both elsewhere; V is below everyone
    everywhere. Alone, A's win rate is 3/5 against B's 2/5; with W, B gains a full win on two
    tasks and half a win fewer on three, and overtakes A (0.6 against 0.5 of the three)."""
    names = ["A", "B", "V", "W"]
    correct = np.array(
        [
            [90, 80, 10, 20],
            [90, 80, 10, 20],
            [90, 80, 10, 20],
            [70, 95, 10, 80],
            [70, 95, 10, 80],
        ]
    )
    return names, ViewCounts(
        correct=correct, rows=np.full(5, 100), present=np.ones(correct.shape, dtype=bool)
    )


def test_a_weak_model_added_reorders_the_top_pair_and_is_named() -> None:
    names, counts = _weak_field()
    report = stability(names, counts, by="win-rate", top=2, resamples=500, seed=0)
    assert report.alone == ("A", "B")
    added = {p.model: p.changed for p in report.added}
    assert set(added) == {"V", "W"}
    assert added["V"] == ()  # below both everywhere: it takes a win from each, no change
    (change,) = added["W"]
    assert (change.a, change.b, change.was, change.now) in (
        ("A", "B", "ahead", "behind"),
        ("B", "A", "behind", "ahead"),
    )
    # The full field has W: there B leads, and leaving W out gives A the lead back.
    assert report.top == ("B", "A")
    left = {p.model: p.changed for p in report.left_out}
    assert [(c.a, c.b, c.was, c.now) for c in left["W"]] == [("B", "A", "ahead", "behind")]
    assert left["V"] == ()
    # Mean score depends on each model's own counts: no field change reorders it.
    by_score = stability(names, counts, by="score", top=2, resamples=0, seed=0)
    assert all(not p.changed for p in (*by_score.left_out, *by_score.added))
    # Under resampling of the five tasks B keeps its lead only where enough B tasks are drawn.
    (hold,) = report.holds
    assert (hold.a, hold.b, hold.relation) == ("B", "A", "ahead")
    assert 0.05 < hold.holds < 0.95


def test_an_order_every_task_agrees_on_holds_under_every_resample() -> None:
    correct = np.array([[90, 50, 10], [80, 60, 20], [70, 65, 30]])
    counts = ViewCounts(correct=correct, rows=np.full(3, 100), present=np.ones((3, 3), bool))
    report = stability(["x", "y", "z"], counts, by="borda", top=3, resamples=200, seed=1)
    assert report.top == ("x", "y", "z")
    assert [h.holds for h in report.holds] == [1.0, 1.0, 1.0]
    assert all(not p.changed for p in (*report.left_out, *report.added))


def test_multitask_refusals(five_tasks: tuple[Registry, dict[str, Any]], tmp_path: Path) -> None:
    reg, _ = five_tasks
    with pytest.raises(InvalidInputError, match="not both"):
        dsreg.leaderboard("task0", tasks=["task1"], registry=reg)
    with pytest.raises(InvalidInputError, match="TASK@TAG"):
        dsreg.leaderboard(tasks=["task0", "task1"], revisions=["task2@original"], registry=reg)
    with pytest.raises(InvalidInputError, match="twice"):
        dsreg.leaderboard(tasks=["task0", "task0"], registry=reg)
    with pytest.raises(InvalidInputError, match="--rank-by"):
        dsreg.leaderboard(tasks=["task0"], rank_by="elo", registry=reg)
    _add(reg, "bare", np.zeros(10, dtype=np.int32), tmp_path)
    with pytest.raises(NotFoundError, match="no model is recorded for task 'bare'"):
        dsreg.leaderboard(tasks=["task0", "bare"], registry=reg)


def test_cli_multitask_board_text_json_and_plot(
    five_tasks: tuple[Registry, dict[str, Any]], cli: Callable[..., Any], tmp_path: Path
) -> None:
    reg, _ = five_tasks
    tasks = ",".join(f"task{t}" for t in range(5))
    base = ["leaderboard", "--tasks", tasks, "--resamples", "50", "--registry", str(reg.root)]
    r = cli(*base, "--revisions", "task0@original", "--top", "3", "--plot", "board.svg")
    assert r.exit_code == 0, r.stderr
    assert "task task0@original" in r.stdout and "task task1@redux" in r.stdout
    assert "WIN RATE" in r.stdout and "stability of the top 3 by mean win rate" in r.stdout
    assert "ORDER KEPT IN 50 RESAMPLES OF THE TASKS" in r.stdout
    assert (tmp_path / "board.svg").read_text().startswith("<?xml")
    r = cli(*base, "--rank-by", "borda", "--views", "corrected", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "dsreg/leaderboard-tasks/1" and doc["rank_by"] == "borda"
    (only,) = doc["boards"]
    assert only["view"] == "corrected"
    borda = [m["borda"] for m in only["models"]]
    assert borda == sorted(borda, reverse=True)
    r = cli("leaderboard", "--registry", str(reg.root))
    assert r.exit_code == 1 and "--tasks" in r.stderr

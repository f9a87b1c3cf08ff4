"""Recorded results: ``dsreg.record`` / ``eval --record``, ``leaderboard``, ``gap`` and
``cite --model``. Scores equal ``dsreg eval``'s; intervals and tests equal statsmodels and scipy
on the same counts; a model recorded once re-scores itself on a relabeling tagged later;
recorded results are immutable, kept by gc, checked by verify."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg import Registry, evaluate
from dsreg.errors import (
    CorruptObjectError,
    IntegrityError,
    NotFoundError,
    PredictionsError,
    TagExistsError,
)
from dsreg.formats.corrections import corrections_table
from dsreg.overlays.write import write_overlay
from dsreg.registry.reader import LocalReader
from dsreg.registry.results import load_predictions
from dsreg.report.board.figures import mcnemar_many
from dsreg.report.stats.core import mcnemar_exact

LabelSet = Any  # tests/report/conftest.py's LabelSet (a fixture's product)
PRODUCER = {"name": "test", "version": "1", "params": {}, "inputs": {}}

BOARD = ("original", "cleaned", "corrected", "honeypot")


def model_probs(ls: LabelSet, seed: int, skill: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = rng.random((ls.n, len(ls.classes)))
    p[np.arange(ls.n), ls.labels] += rng.random(ls.n) * skill
    out: np.ndarray = p / p.sum(axis=1, keepdims=True)
    return out


def top_classes(probs: np.ndarray, m: int) -> np.ndarray:
    """The m most probable classes of each row, best first (ties: lower index first)."""
    return np.argsort(-probs, axis=1, kind="stable")[:, :m].astype(np.int64)


def models_for(ls: LabelSet, count: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for i in range(count):
        if i % 3 == 2:  # labels, not probabilities
            lab = np.where(
                rng.random(ls.n) < 0.6, ls.labels, rng.integers(0, len(ls.classes), ls.n)
            )
            out[f"m{i}"] = lab.astype(np.int64)
        elif i % 4 == 3:  # top-m class indices, best first
            out[f"m{i}"] = top_classes(model_probs(ls, seed + i, 0.5), len(ls.classes) - 1)
        else:
            out[f"m{i}"] = model_probs(ls, seed + i, 0.3 + 0.4 * i)
    return out


def check_board_against_eval(ls: LabelSet, board: Any, preds: dict[str, np.ndarray]) -> None:
    """Every revision's counts are what ``dsreg eval`` counts on it; intervals are
    statsmodels' Wilson intervals; pair tests are statsmodels' exact McNemar, Holm-corrected
    as statsmodels does."""
    from statsmodels.stats.contingency_tables import mcnemar
    from statsmodels.stats.multitest import multipletests
    from statsmodels.stats.proportion import proportion_confint

    for b in board.revisions:
        report = evaluate(b.revision, preds, views=BOARD, registry=ls.reg)
        by_model = {m.model: m for m in report.models}
        for v in BOARD:
            f = b.figure(v)
            assert f.rows == report.views[v]
            for i, m in enumerate(b.models):
                assert int(f.correct[i]) == by_model[m].scores[v].correct[1], (b.name, v, m)
                assert (int(f.ranks[i]) or None) == by_model[m].scores[v].rank
                if f.rows:
                    lo, hi = proportion_confint(int(f.correct[i]), f.rows, method="wilson")
                    assert f.intervals[i] == pytest.approx((lo, hi), abs=1e-12)
            pvals, pairs = [], []
            for i in range(len(b.models)):
                for j in range(i + 1, len(b.models)):
                    a_only, b_only = int(f.only[i, j]), int(f.only[j, i])
                    if a_only + b_only:
                        table = [[0, a_only], [b_only, 0]]
                        want = mcnemar(table, exact=True).pvalue
                    else:
                        want = 1.0
                    assert f.pvalues[i, j] == pytest.approx(want, rel=1e-9, abs=1e-12)
                    pvals.append(want)
                    pairs.append((i, j))
            if pvals:
                adj = multipletests(pvals, method="holm")[1]
                for (i, j), want in zip(pairs, adj, strict=True):
                    assert f.adjusted[i, j] == pytest.approx(want, rel=1e-9, abs=1e-12)


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    n=st.integers(20, 160),
    k=st.integers(2, 6),
    overlays=st.integers(0, 3),
    count=st.integers(1, 5),
    seed=st.integers(0, 10_000),
)
def test_leaderboard_scores_as_eval_with_statsmodels_intervals(
    tmp_path_factory: pytest.TempPathFactory,
    make_labelset: Callable[..., LabelSet],
    n: int,
    k: int,
    overlays: int,
    count: int,
    seed: int,
) -> None:
    reg = dsreg.init(registry=tmp_path_factory.mktemp("board") / "reg")
    ls = make_labelset(reg, n=n, k=k, seed=seed, overlays=overlays)
    preds = models_for(ls, count, seed)
    dsreg.record("toy@original", preds, registry=reg)
    board = dsreg.leaderboard(
        "toy", revisions=["original", "corrected", "honeypot"], resamples=50, registry=reg
    )
    assert [b.name for b in board.revisions] == ["original", "corrected", "honeypot"]
    check_board_against_eval(ls, board, preds)


def test_more_than_64_models_count_as_eval(make_labelset: Callable[..., LabelSet]) -> None:
    ls = make_labelset(n=50, k=3, seed=5, overlays=2)
    rng = np.random.default_rng(1)
    preds = {f"m{i:02d}": rng.integers(0, 3, ls.n) for i in range(66)}
    dsreg.record("toy@original", preds, registry=ls.reg)
    board = dsreg.leaderboard("toy", revisions=["corrected"], resamples=0, registry=ls.reg)
    report = evaluate("toy@corrected", preds, views=BOARD, registry=ls.reg)
    f = board.revisions[0].figure("corrected")
    assert f.correct.tolist() == [m.scores["corrected"].correct[1] for m in report.models]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 400), st.integers(0, 400))
def test_vectorised_mcnemar_is_the_exact_test(a: int, b: int) -> None:
    assert float(mcnemar_many(np.array([a]), np.array([b]))[0]) == pytest.approx(
        mcnemar_exact(a, b), rel=1e-9, abs=1e-15
    )


# -- a relabeling tagged after the models were recorded ------------------------------------------


def relabeled(reg: Registry, ls: LabelSet, rows: np.ndarray, tag: str) -> np.ndarray:
    """Tag ``toy@<tag>``: ``rows`` corrected to the next class; return the corrected labels."""
    k = len(ls.classes)
    sug = (ls.labels[rows] + 1) % k
    table = corrections_table(
        rows=rows,
        example_ids=[ls.ids[r] for r in rows],
        given_label=ls.labels[rows],
        suggested_label=sug,
        verdict=["correctable"] * len(rows),
    )
    d = write_overlay(reg, base=ls.snapshot, kind="manual", table=table, producer=PRODUCER)
    dsreg.tag(f"toy@{tag}", "toy@original", overlays=[d], view="corrected", registry=reg)
    out = ls.labels.copy()
    out[rows] = sug
    return out


@pytest.fixture
def flipping(make_labelset: Callable[..., LabelSet]) -> tuple[LabelSet, dict[str, np.ndarray]]:
    """Models recorded on ``toy@original``; then ``toy@relabel`` corrects rows 0-199.
    ``given`` predicts the given labels, ``fixed`` the corrected ones, ``near`` the given
    labels but the corrected ones on three rows."""
    ls = make_labelset(n=400, k=4, seed=3, overlays=0)
    rows = np.arange(200)
    k = len(ls.classes)
    fixed = ls.labels.copy()
    fixed[rows] = (ls.labels[rows] + 1) % k
    near = ls.labels.copy()
    near[:3] = fixed[:3]
    preds = {"given": ls.labels.astype(np.int64), "fixed": fixed.astype(np.int64), "near": near}
    for m, p in preds.items():
        dsreg.record("toy@original", p, model=m, registry=ls.reg)
    relabeled(ls.reg, ls, rows, "relabel")
    return ls, preds


def test_a_recorded_model_rescores_itself_on_a_later_relabeling(
    flipping: tuple[LabelSet, dict[str, np.ndarray]],
) -> None:
    ls, preds = flipping
    board = dsreg.leaderboard("toy", revisions=["original", "relabel"], registry=ls.reg)
    before, after = board.revisions
    assert (before.name, after.name) == ("original", "relabel")
    f0, f1 = before.figure("corrected"), after.figure("corrected")
    idx = {m: before.models.index(m) for m in preds}
    assert int(f0.correct[idx["given"]]) == 400 and int(f1.correct[idx["given"]]) == 200
    assert int(f0.correct[idx["fixed"]]) == 200 and int(f1.correct[idx["fixed"]]) == 400
    assert int(f1.ranks[idx["fixed"]]) == 1 and int(f0.ranks[idx["given"]]) == 1
    check_board_against_eval(ls, board, preds)
    flips = {(f.view, f.a, f.b): f.significant for f in board.flips}
    # fixed overtakes given by 200 rows each way: significant on both revisions.
    assert flips[("corrected", "given", "fixed")] is True
    # near gains 3 rows on the relabeling: a flip inside the noise.
    assert flips[("corrected", "given", "near")] is False
    assert ("cleaned", "given", "near") not in flips  # no row is removed: no flip there


def test_leaderboard_defaults_to_every_tag_oldest_first(
    flipping: tuple[LabelSet, dict[str, np.ndarray]],
) -> None:
    ls, _ = flipping
    board = dsreg.leaderboard("toy", resamples=20, registry=ls.reg)
    names = [b.name for b in board.revisions]
    assert names[0] == "original" and names[-1] == "relabel"
    again = dsreg.leaderboard("toy", resamples=20, registry=ls.reg)
    assert board.to_json() == again.to_json()  # the same seed, the same intervals
    other = dsreg.leaderboard("toy", resamples=20, seed=1, registry=ls.reg)
    assert other.to_dict()["seed"] == 1


def test_rank_intervals_separate_clear_winners_and_not_ties(
    flipping: tuple[LabelSet, dict[str, np.ndarray]],
) -> None:
    ls, _ = flipping
    board = dsreg.leaderboard("toy", revisions=["relabel"], resamples=300, registry=ls.reg)
    f = board.revisions[0].figure("corrected")
    ranks = dict(zip(board.revisions[0].models, f.rank_intervals, strict=True))
    assert ranks["fixed"] == (1.0, 1.0)  # 400 of 400 against 200 and 203
    # The resamples are paired: near is right wherever given is, and on 3 rows more, so it
    # never ranks below given (a resample drawing none of the 3 ties them), though McNemar
    # cannot call 3 rows against 0.
    assert ranks["near"] == (2.0, 2.0) and ranks["given"][1] == 3.0
    i, j = (board.revisions[0].models.index(m) for m in ("near", "given"))
    assert not f.significant(i, j) and f.pvalues[i, j] == pytest.approx(0.25)


# -- immutability, the log, gc and verify ---------------------------------------------------------


def test_recording_is_immutable_and_logged_like_a_tag(make_labelset: Any) -> None:
    ls = make_labelset(n=50, k=3, seed=1, overlays=1)
    p = model_probs(ls, 0, 1.0)
    (first,) = dsreg.record(
        "toy@original", p, model="resnet", meta={"epochs": "90"}, registry=ls.reg
    )
    assert first.status == "recorded"
    lines = len(dsreg.log("toy", registry=ls.reg))
    (again,) = dsreg.record(
        "toy@original", p, model="resnet", meta={"epochs": "90"}, registry=ls.reg
    )
    assert again.status == "unchanged" and again.digest == first.digest
    assert len(dsreg.log("toy", registry=ls.reg)) == lines  # a no-op writes nothing
    other = model_probs(ls, 1, 1.0)
    with pytest.raises(TagExistsError, match=r"'resnet'.*--force"):
        dsreg.record("toy@original", other, model="resnet", registry=ls.reg)
    with pytest.raises(TagExistsError, match="--force"):
        dsreg.record("toy@original", p, model="resnet", meta={"epochs": "91"}, registry=ls.reg)
    assert len(dsreg.log("toy", registry=ls.reg)) == lines
    (moved,) = dsreg.record("toy@original", other, model="resnet", force=True, registry=ls.reg)
    assert moved.status == "moved" and moved.old == first.digest
    last = dsreg.log("toy", registry=ls.reg)[-1]
    assert (last.event, last.tag, last.old, last.new) == (
        "result",
        "resnet",
        first.digest,
        moved.digest,
    )
    # The old predictions stay (the log keeps the old result from gc), the new ones are scored.
    gc = dsreg.gc(registry=ls.reg)
    assert first.predictions not in gc.removed and ls.reg.store.has(first.predictions)
    cite = dsreg.cite_result("toy@corrected", model="resnet", registry=ls.reg)
    assert cite.predictions == moved.predictions
    gone = dsreg.gc(prune_log_older_than="now", registry=ls.reg)
    assert first.predictions in gone.removed and moved.predictions not in gone.removed
    assert dsreg.verify(registry=ls.reg).ok


def test_gc_keeps_recorded_results_and_verify_finds_damage(
    make_labelset: Any, flip_byte: Callable[..., None]
) -> None:
    ls = make_labelset(n=40, k=3, seed=2, overlays=1)
    before = dsreg.gc(dry_run=True, registry=ls.reg).logged
    (rec,) = dsreg.record("toy@original", {"m": ls.labels.astype(np.int64)}, registry=ls.reg)
    # A model ref keeps its result: gc does not count it among what the log alone keeps.
    assert dsreg.gc(dry_run=True, registry=ls.reg).logged == before
    res = dsreg.gc(prune_log_older_than="now", registry=ls.reg)
    assert rec.digest not in res.removed and rec.predictions not in res.removed
    assert dsreg.verify(registry=ls.reg).ok
    flip_byte(ls.reg, rec.predictions)
    v = dsreg.verify(registry=ls.reg)
    assert not v.ok and rec.predictions in {p.digest for p in v.problems}
    with pytest.raises(CorruptObjectError):
        dsreg.leaderboard("toy", registry=ls.reg)


def test_stored_predictions_read_whole_are_rehashed_and_checked(
    make_labelset: Any, flip_byte: Callable[..., None]
) -> None:
    """Small predictions are read whole rather than memory-mapped: the same array, and a
    damaged object or one that does not hold what its record says is refused, never served."""
    ls = make_labelset(n=40, k=3, seed=2, overlays=1)
    given = {"lab": ls.labels.astype(np.int32), "prob": model_probs(ls, 0, 1.0)}
    recs = dsreg.record("toy@original", given, registry=ls.reg)
    reader = LocalReader(ls.reg)
    for r in recs:
        rec = reader.result("toy", r.model).record
        got = load_predictions(ls.reg, rec)
        np.testing.assert_array_equal(got, given[r.model])
        assert not got.flags.writeable
        # Intact bytes, but the record names another dtype: not the array it says.
        with pytest.raises(IntegrityError, match=f"model {r.model!r} hold"):
            load_predictions(ls.reg, dataclasses.replace(rec, dtype="<i8"))
    for r in recs:
        flip_byte(ls.reg, r.predictions, at=-3)  # in the array, past the header
        with pytest.raises(CorruptObjectError):
            load_predictions(ls.reg, reader.result("toy", r.model).record)
    with pytest.raises(CorruptObjectError):
        dsreg.leaderboard(tasks=["toy"], registry=ls.reg)


def test_bad_predictions_record_nothing(make_labelset: Any) -> None:
    ls = make_labelset(n=40, k=3, seed=2, overlays=1)
    good = model_probs(ls, 0, 1.0)
    nan, neg = good.copy(), good.copy()
    nan[7, 1] = np.nan
    neg[9, 0] = -0.5
    cases = {
        "rows": (np.zeros(39, dtype=np.int64), "39 labels.*40 rows"),
        "classes": (np.full((40, 4), 0.25), r"shape \(40, 4\).*\(40, 3\)"),
        "range": (np.full(40, 3), r"outside \[0, 3\)"),
        "nan": (nan, "row 7 holds NaN"),
        "neg": (neg, "row 9 holds negative"),
        "top_twice": (np.array([[0, 0]] * 40), r"40 rows name a class twice, first row 0"),
        "top_range": (np.array([[1, 5]] * 40), r"rows name a class outside \[0, 3\)"),
        "top_rows": (np.array([[1, 2]] * 39), r"top-2 classes of 39 rows.*40 rows"),
    }
    for name, (arr, msg) in cases.items():
        with pytest.raises(PredictionsError, match=msg):
            # The good model is checked first and is not recorded either: all or nothing.
            dsreg.record("toy@original", {"ok": good, name: arr}, registry=ls.reg)
    with pytest.raises(NotFoundError, match="no model is recorded"):
        dsreg.leaderboard("toy", registry=ls.reg)
    with pytest.raises(NotFoundError, match=r"no model 'nosuch'.*recorded: none"):
        dsreg.cite_result("toy@original", model="nosuch", registry=ls.reg)


def test_top_k_predictions_score_as_the_probabilities_they_come_from(
    make_labelset: Callable[..., LabelSet],
) -> None:
    """A top-m array scores top-1..top-m exactly as the probabilities it was cut from, says
    nothing of top-(m+1), and is recorded as its own kind."""
    ls = make_labelset(n=300, k=6, seed=5, overlays=2)
    probs = model_probs(ls, 1, 0.8)
    top = top_classes(probs, 3)
    full = evaluate("toy@corrected", {"m": probs}, top_k=(1, 2, 3, 4), registry=ls.reg)
    cut = evaluate("toy@corrected", {"m": top}, top_k=(1, 2, 3, 4), registry=ls.reg)
    for view, score in cut.models[0].scores.items():
        want = full.models[0].scores[view].correct
        assert [score.correct[k] for k in (1, 2, 3)] == [want[k] for k in (1, 2, 3)], view
        assert score.correct[4] is None
    assert cut.models[0].predictions.kind == "topk"
    (rec,) = dsreg.record("toy@original", {"top3": top}, registry=ls.reg)
    assert rec.status == "recorded"
    board = dsreg.leaderboard("toy", revisions=["corrected"], resamples=20, registry=ls.reg)
    f = board.revisions[0].figure("corrected")
    assert int(f.correct[0]) == full.models[0].scores["corrected"].correct[1]
    assert dsreg.cite_result("toy@original", model="top3", registry=ls.reg).kind == "topk"


# -- gap: two test sets of one task ---------------------------------------------------------------


def test_gap_fits_new_against_old_accuracy(
    make_registry: Callable[..., Registry], make_labelset: Callable[..., LabelSet], tmp_path: Path
) -> None:
    from scipy.stats import linregress

    reg = make_registry()
    old = make_labelset(reg, n=300, k=4, seed=1, overlays=1, name="old")
    new = make_labelset(reg, n=200, k=4, seed=2, overlays=1, name="new")
    rng = np.random.default_rng(0)
    acc_old, acc_new = [], []
    for i, skill in enumerate([0.5, 0.6, 0.7, 0.8, 0.9]):
        for ls, accs, drop in ((old, acc_old, 0.0), (new, acc_new, 0.12)):
            right = rng.random(ls.n) < skill - drop
            pred = np.where(right, ls.labels, (ls.labels + 1) % 4).astype(np.int64)
            accs.append(float((pred == ls.labels).mean()))
            dsreg.record(f"{ls.name}@original", pred, model=f"m{i}", registry=reg)
    dsreg.record("old@original", old.labels.astype(np.int64), model="only-old", registry=reg)
    res = dsreg.gap("old@original", "new@original", plot=tmp_path / "gap.svg", registry=reg)
    assert [m.model for m in res.models] == [f"m{i}" for i in range(5)]  # recorded on both
    for m, a, b in zip(res.models, acc_old, acc_new, strict=True):
        assert m.old["accuracy"] == pytest.approx(a) and m.new["accuracy"] == pytest.approx(b)
        assert m.gap == pytest.approx(a - b)
    want = linregress(acc_old, acc_new)
    assert res.slope == pytest.approx(want.slope)
    assert res.intercept == pytest.approx(want.intercept)
    assert res.r2 == pytest.approx(want.rvalue**2)
    assert (tmp_path / "gap.svg").read_text().startswith("<?xml")


# -- the command line -----------------------------------------------------------------------------


@pytest.fixture
def cli_set(
    cli: Callable[..., Any], make_labelset: Callable[..., LabelSet], tmp_path: Path
) -> tuple[Callable[..., Any], LabelSet, Path]:
    reg = dsreg.init(registry=tmp_path / ".dsreg")
    ls = make_labelset(reg, n=120, k=3, seed=4, overlays=2)
    for i in range(3):
        np.save(tmp_path / f"m{i}.npy", model_probs(ls, i, 0.4 + 0.5 * i))
    return cli, ls, tmp_path


def test_cli_records_scores_and_cites(cli_set: Any) -> None:
    cli, ls, d = cli_set
    for i in range(3):
        r = cli("eval", "toy@original", str(d / f"m{i}.npy"), "--record", "--model", f"r{i}",
                "--meta", f"epochs={10 * i}")  # fmt: skip
        assert r.exit_code == 0, r.stderr
        assert f"Recorded model r{i} as result" in r.stderr
    r = cli(
        "eval", "toy@original", str(d / "m0.npy"), "--record", "--model", "r0", "--meta", "epochs=0"
    )
    assert r.exit_code == 0 and "nothing to do" in r.stderr
    log = cli("log", "toy")
    assert "result" in log.stdout and "r2" in log.stdout
    r = cli("leaderboard", "toy", "--resamples", "100", "--plot", str(d / "ranks.png"))
    assert r.exit_code == 0, r.stderr
    assert "rank 1 [" in r.stdout and "corrected" in r.stdout
    assert (d / "ranks.png").read_bytes()[:4] == b"\x89PNG"
    two = cli("leaderboard", "toy", "--revisions", "original,corrected", "--resamples", "50")
    assert max(len(line) for line in two.stdout.splitlines()) <= 100
    j = json.loads(cli("leaderboard", "toy", "--json", "--revisions", "corrected").stdout)
    assert j["schema"] == "dsreg/leaderboard/1"
    score = j["revisions"][0]["scores"]["r2"]["corrected"]
    assert set(score) == {"rows", "correct", "accuracy", "interval", "rank", "rank_interval"}
    c = cli("cite", "toy@corrected", "--model", "r1")
    assert c.exit_code == 0, c.stderr
    rec = LocalReader(ls.reg).revision("toy@corrected")
    assert rec.digest in c.stdout and "epochs=10" in c.stdout and "95% CI" in c.stdout
    cj = json.loads(cli("cite", "toy@corrected", "--model", "r1", "--json").stdout)
    assert cj["revision"] == rec.digest and cj["figures"]["corrected"]["rows"] > 0


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda ls: np.zeros(ls.n - 1, dtype=np.int64), "119 labels"),
        (lambda ls: np.full((ls.n, 4), 0.25), "(120, 4)"),
        (
            lambda ls: np.where(np.arange(ls.n)[:, None] == 5, np.nan, np.full((ls.n, 3), 0.3)),
            "NaN",
        ),
        (
            lambda ls: np.where(np.arange(ls.n)[:, None] == 5, -1.0, np.full((ls.n, 3), 0.3)),
            "negative",
        ),
    ],
)
def test_cli_bad_predictions_exit_1_and_record_nothing(
    cli_set: Any, registry_state: Callable[[Path], Any], make: Any, message: str
) -> None:
    cli, ls, d = cli_set
    np.save(d / "bad.npy", make(ls))
    before = registry_state(ls.reg.root)
    r = cli("eval", "toy@original", str(d / "bad.npy"), "--record", "--model", "bad")
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: ") and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert registry_state(ls.reg.root) == before


def test_cli_unknown_model_and_damaged_result(cli_set: Any, flip_byte: Callable[..., None]) -> None:
    cli, ls, d = cli_set
    assert (
        cli("eval", "toy@original", str(d / "m0.npy"), "--record", "--model", "r0").exit_code == 0
    )
    r = cli("cite", "toy@original", "--model", "nosuch")
    assert r.exit_code == 1 and "no model 'nosuch'" in r.stderr and "r0" in r.stderr
    digest = ls.reg.root.joinpath("results", "toy", "r0").read_text().strip()
    flip_byte(ls.reg, digest)
    r = cli("leaderboard", "toy")
    assert r.exit_code == 1 and r.stderr.startswith("Error: ")
    assert len(r.stderr.strip().splitlines()) == 1
    r = cli("verify")
    assert r.exit_code == 1 and digest.split(":")[1][:12] in r.stdout + r.stderr


@settings(max_examples=60, deadline=None)
@given(
    models=st.integers(1, 5),
    views=st.lists(st.booleans(), min_size=1, max_size=4),
    base=st.integers(0, 40),
    named=st.integers(0, 40),
    resamples=st.integers(0, 30),
    seed=st.integers(0, 1000),
)
def test_structured_counts_equal_the_joint_patterns(
    models: int, views: list[bool], base: int, named: int, resamples: int, seed: int
) -> None:
    """The leaderboard's cheaper product over its two-part patterns gives the sums, resampled
    sums and discordant counts of the plain patterns they stand for."""
    from dsreg.report.board.figures import counts_of
    from dsreg.report.board.leaderboard import RevisionPatterns
    from dsreg.report.stats.core import Patterns

    rng = np.random.default_rng(seed)
    width = len(views) * (models + 1)
    rp = RevisionPatterns(
        base=Patterns(
            features=rng.integers(0, 2, (base, models)).astype(np.uint8),
            counts=rng.integers(1, 50, base).astype(np.int64),
        ),
        named=Patterns(
            features=rng.integers(0, 2, (named, width)).astype(np.uint8),
            counts=rng.integers(1, 5, named).astype(np.int64),
        ),
        complement=tuple(views),
    )
    got = rp.counts(resamples, seed)
    want = counts_of(rp.joint(), views=len(views), models=models, resamples=resamples, seed=seed)
    assert got.sums.tolist() == want.sums.tolist()
    for a, b in zip(got.only, want.only, strict=True):
        assert a.tolist() == b.tolist()
    if resamples:
        assert got.samples is not None and want.samples is not None
        assert np.array_equal(got.samples, want.samples)


def test_class_indices_outside_the_classes_are_refused_by_their_first() -> None:
    from dsreg.formats.inputfiles import aligned_predictions

    preds = np.array([0, 1, 7, 2, -1, 9])
    with pytest.raises(PredictionsError) as caught:
        aligned_predictions(preds, rows=6, classes=["a", "b", "c"], what="model m")
    assert str(caught.value) == (
        "model m: 3 labels are outside [0, 3), first 7 at row 2; the snapshot has 3 classes"
    )

"""Intervals, tests, rank changes, correlation and flip points of
``dsreg.report.stats.significance``, against statsmodels and scipy on the same counts, against
simulation, and inside ``evaluate``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dsreg import evaluate
from dsreg.errors import InvalidInputError
from dsreg.report.stats import rowscores
from dsreg.report.stats.counts import CorrectnessCounter
from dsreg.report.stats.significance import StatsOptions, significance

pytest.importorskip("statsmodels", reason="statsmodels is the oracle")
from scipy.stats import kendalltau, spearmanr
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint


def _data(views: dict[str, np.ndarray], models: list[str]) -> Any:
    counter = CorrectnessCounter(list(views), models)
    counter.add(views)
    return counter.correctness()


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 5),
    st.integers(5, 300),
    st.integers(0, 2**32 - 1),
)
@example(5, 5, 654336344)  # the second view serves none of the 5 rows
def test_view_figures_equal_statsmodels_and_scipy(models: int, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    right = (rng.random((n, models)) < rng.uniform(0.2, 0.9, models)).astype(np.int8)
    served = rng.random(n) < 0.8
    sub = np.where(served[:, None], right, -1).astype(np.int8)
    names = [f"m{j}" for j in range(models)]
    sig = significance(_data({"all": right, "some": sub}, names), StatsOptions(resamples=50))
    for view, c in (("all", right), ("some", right[served])):
        vs = sig.views[view]
        assert vs.rows == len(c)
        pairs = {(p.a, p.b): p for p in vs.pairs}
        # A view that serves no row has no pair to test.
        assert len(pairs) == (models * (models - 1) // 2 if len(c) else 0)
        for j, name in enumerate(names):
            s = vs.models[name]
            assert s.correct == int(c[:, j].sum())
            if not len(c):
                assert s.interval is None and s.accuracy is None
                continue
            low, high = proportion_confint(s.correct, len(c), alpha=0.05, method="wilson")
            assert s.interval == pytest.approx((low, high), abs=1e-12)
        if not len(c):
            continue
        want, keys = [], []
        for a in range(models):
            for b in range(a + 1, models):
                only_a = int(((c[:, a] == 1) & (c[:, b] == 0)).sum())
                only_b = int(((c[:, a] == 0) & (c[:, b] == 1)).sum())
                p = pairs[(names[a], names[b])]
                assert (p.only_a, p.only_b) == (only_a, only_b)
                ref = mcnemar([[0, only_a], [only_b, 0]], exact=True).pvalue
                assert p.p == pytest.approx(min(1.0, ref), rel=1e-9, abs=1e-300)
                want.append(p.p)
                keys.append((names[a], names[b]))
        ref_holm = multipletests(want, alpha=0.05, method="holm")[1]
        for key, h in zip(keys, ref_holm, strict=True):
            assert pairs[key].p_holm == pytest.approx(h, abs=1e-12)
            assert pairs[key].significant == (h < 0.05)


def test_a_lone_model_ranks_first_in_every_resample() -> None:
    """With one model nothing is resampled for Wilson's intervals: its figures are those the
    bootstrap gives (rank interval [1, 1]; no pairs), the accuracy intervals aside."""
    rng = np.random.default_rng(4)
    right = (rng.random((500, 1)) < 0.7).astype(np.int8)
    none = np.full_like(right, -1)  # a view that serves no row
    data = _data({"original": right, "honeypot": none}, ["m"])
    lone = significance(data).to_dict()
    boot = significance(data, StatsOptions(ci="bootstrap")).to_dict()
    for d in (lone, boot):
        d.pop("ci")
        for view in d["views"].values():
            for stat in view["models"].values():
                stat.pop("interval")
    assert lone == boot
    assert lone["views"]["original"]["models"]["m"]["rank_interval"] == [1.0, 1.0]
    assert lone["views"]["honeypot"]["models"]["m"]["rank_interval"] is None


def test_rank_correlation_equals_scipy_and_warns_on_a_negative_one() -> None:
    rng = np.random.default_rng(5)
    n, names = 400, [f"m{j}" for j in range(6)]
    acc_given = np.linspace(0.9, 0.4, 6)
    given_ = (rng.random((n, 6)) < acc_given).astype(np.int8)
    corrected = (rng.random((n, 6)) < acc_given[::-1]).astype(np.int8)
    views = {"honeypot_given": given_, "honeypot": corrected}
    c = significance(_data(views, names)).correlation
    assert c is not None
    x, y = given_.sum(axis=0), corrected.sum(axis=0)
    rho, rho_p = spearmanr(x, y)
    tau, tau_p = kendalltau(x, y)
    assert (c.spearman, c.spearman_p) == pytest.approx((rho, rho_p))
    assert (c.kendall, c.kendall_p) == pytest.approx((tau, tau_p))
    assert c.spearman < 0 and c.warning
    views = {"honeypot_given": given_, "honeypot": given_}
    same = significance(_data(views, names)).correlation
    assert same is not None and same.spearman == pytest.approx(1.0) and not same.warning


def test_bootstrap_intervals_are_deterministic_for_a_seed_and_near_wilson() -> None:
    rng = np.random.default_rng(2)
    right = (rng.random((20_000, 3)) < [0.5, 0.5, 0.9]).astype(np.int8)
    # b is a but for 400 rows: 190 only a gets right, 210 only b: a standard error apart.
    right[:, 1] = right[:, 0]
    right[:190, 0], right[:190, 1] = 1, 0
    right[190:400, 0], right[190:400, 1] = 0, 1
    data = _data({"original": right}, ["a", "b", "c"])
    opts = StatsOptions(ci="bootstrap", resamples=2_000, seed=7)
    one, two = significance(data, opts), significance(data, opts)
    assert one.to_dict() == two.to_dict()
    other = significance(data, StatsOptions(ci="bootstrap", resamples=2_000, seed=8))
    assert other.to_dict() != one.to_dict()
    wil = significance(data)
    for m in "abc":
        boot = one.views["original"].models[m].interval
        ref = wil.views["original"].models[m].interval
        assert boot is not None and ref is not None
        assert boot == pytest.approx(ref, abs=0.002)
    # c is far ahead: always first; a and b are a standard error apart: their ranks overlap.
    ranks = {m: one.views["original"].models[m].rank_interval for m in "abc"}
    assert ranks == {"a": (2.0, 3.0), "b": (2.0, 3.0), "c": (1.0, 1.0)}
    far, near = one.views["original"].pair("a", "c"), one.views["original"].pair("a", "b")
    assert far is not None and far.difference_interval is not None and far.significant
    assert far.difference_interval[1] < 0
    assert near is not None and near.difference_interval is not None and not near.significant
    assert near.difference_interval[0] < 0 < near.difference_interval[1]


def test_a_rank_change_is_significant_only_where_both_orders_are() -> None:
    """a leads b clearly on the original rows and trails clearly on the corrected ones; c and
    d swap by a row or two: their change is noise."""
    n = 2_000
    rng = np.random.default_rng(3)
    base = (rng.random((n, 4)) < 0.5).astype(np.int8)
    orig, corr = base.copy(), base.copy()
    orig[:, 0], orig[:, 1] = rng.random(n) < 0.8, rng.random(n) < 0.6
    corr[:, 0], corr[:, 1] = rng.random(n) < 0.6, rng.random(n) < 0.8
    orig[:, 3] = orig[:, 2]
    orig[:2, 2], orig[:2, 3] = 1, 0  # c ahead by two rows
    corr[:, 3] = corr[:, 2]
    corr[:2, 2], corr[:2, 3] = 0, 1  # d ahead by two rows
    sig = significance(_data({"original": orig, "corrected": corr}, list("abcd")))
    flips = {(c.a, c.b): c.significant for c in sig.order_changes}
    assert flips == {("a", "b"): True, ("c", "d"): False}
    changes = {c.model: c for c in sig.rank_changes}
    assert changes["a"].significant and changes["a"].against == ("b",)
    assert changes["a"].change is not None and changes["a"].change < 0
    assert changes["b"].significant and changes["b"].change is not None
    assert changes["b"].change > 0
    assert not changes["c"].significant and not changes["d"].significant
    assert changes["c"].change == -1 and changes["d"].change == 1


def test_flip_points_match_a_simulated_removal_of_correct_rows() -> None:
    """The corrected view holds correctly labelled rows and the corrected errors (the
    honeypot); A leads overall, B on the errors. Removing the closed form's share of correctly
    labelled rows at random brings their mean difference to zero."""
    rng = np.random.default_rng(13)
    n_c, n_e = 3_000, 150
    a = np.concatenate([rng.random(n_c) < 0.93, rng.random(n_e) < 0.3]).astype(np.int8)
    b = np.concatenate([rng.random(n_c) < 0.90, rng.random(n_e) < 0.7]).astype(np.int8)
    corrected = np.stack([a, b], axis=1)
    honeypot = np.where(np.arange(n_c + n_e)[:, None] >= n_c, corrected, -1).astype(np.int8)
    sig = significance(
        _data({"corrected": corrected, "honeypot": honeypot}, ["A", "B"]),
        StatsOptions(resamples=500),
    )
    assert sig.flip_views == ("corrected", "honeypot")
    (fp,) = sig.flip_points
    assert (fp.a, fp.b, fp.rows, fp.errors) == ("A", "B", n_c, n_e)
    assert fp.removed_interval is not None and fp.prevalence_interval is not None
    assert fp.removed_interval[0] <= fp.removed <= fp.removed_interval[1]
    assert fp.prevalence == pytest.approx(n_e / ((1 - fp.removed) * n_c + n_e))

    def mean_gap(removed: float, trials: int = 300) -> tuple[float, float]:
        keep = round((1 - removed) * n_c)
        gaps = np.empty(trials)
        for t in range(trials):
            kept = np.concatenate(
                [rng.choice(n_c, size=keep, replace=False), np.arange(n_c, n_c + n_e)]
            )
            gaps[t] = a[kept].mean() - b[kept].mean()
        return float(gaps.mean()), float(gaps.std() / np.sqrt(trials))

    before, se = mean_gap(max(0.0, fp.removed - 0.04))
    assert before > 3 * se
    after, se = mean_gap(min(1.0, fp.removed + 0.04))
    assert after < -3 * se
    at, se = mean_gap(fp.removed)
    assert abs(at) < 4 * se + 1 / (n_e + (1 - fp.removed) * n_c)


def test_bad_correctness_and_options_are_refused() -> None:
    counter = CorrectnessCounter(["original"], ["a", "b"])
    with pytest.raises(InvalidInputError, match="shape"):
        counter.add({"original": np.zeros((3, 3), np.int8)})
    with pytest.raises(InvalidInputError, match="outside -1, 0, 1"):
        counter.add({"original": np.full((3, 2), 2, np.int8)})
    with pytest.raises(InvalidInputError, match="some models only"):
        counter.add({"original": np.array([[1, -1]], np.int8)})
    with pytest.raises(InvalidInputError, match="missing"):
        counter.add({})
    data = counter.correctness()
    for bad, what in [
        (StatsOptions(ci="normal"), "--ci 'normal'"),
        (StatsOptions(resamples=0), "--resamples 0"),
        (StatsOptions(seed=-1), "--seed -1"),
    ]:
        with pytest.raises(InvalidInputError, match=what):
            significance(data, bad)


@pytest.mark.parametrize("seed", range(3))
def test_evaluate_reports_figures_of_its_own_counts(
    make_labelset: Any, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The statistics of a report are computed on the same rows as its scores: every view's
    correct counts and rows agree, the honeypot's given labels included; rows no overlay
    names, counted by their models' bits, count as when built one by one."""
    ls = make_labelset(n=90, k=4, seed=seed, overlays=1 + seed % 3)
    rng = np.random.default_rng(seed)
    preds = {f"m{j}": np.where(rng.random(ls.n) < 0.7, ls.labels, rng.integers(0, 4, ls.n))
             for j in range(3)}  # fmt: skip
    report = evaluate("toy@corrected", preds, registry=ls.reg)
    with monkeypatch.context() as m:
        m.setattr(rowscores, "_KEY_BITS", 0)  # every row built one by one
        slow = evaluate("toy@corrected", preds, registry=ls.reg)
    assert slow.to_json() == report.to_json()
    sig = report.significance
    assert sig is not None and sig.options == StatsOptions()
    for m in report.models:
        for view, s in m.scores.items():
            vs = sig.views[view]
            assert (vs.rows, vs.models[m.model].correct) == (s.rows, s.correct[1])
            assert vs.models[m.model].rank == s.rank
            if view == "honeypot":
                g = sig.views["honeypot_given"]
                assert (g.models[m.model].correct, g.models[m.model].rank) == (
                    s.given_correct[1] if s.given_correct else None,
                    s.given_rank,
                )
        change = sig.rank_change("original", "corrected", m.model)
        assert change is not None and change.change == m.rank_change["original_to_corrected"]
    assert report.to_dict()["significance"]["views"]["original"]["rows"] == ls.n


def test_set_and_majority_views_are_measured_on_their_rows(
    make_registry: Any, tmp_path: Any
) -> None:
    """Label sets (ReaL) and raters' counts: the set accuracy and the majority accuracy of the
    report are the statistics' counts of the multilabel and majority views."""
    import json

    import dsreg

    reg = make_registry()
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32)
    np.save(tmp_path / "labels.npy", labels)
    dsreg.add("ds", labels=tmp_path / "labels.npy", classes=["a", "b", "c"], tag="v1",
              registry=reg)  # fmt: skip
    (tmp_path / "real.json").write_text(json.dumps([[0], [0, 1], [], [1], [1, 2], [2], [0], [2]]))
    counts = np.array([[5, 0, 0], [1, 4, 0], [2, 2, 1], [0, 5, 0], [0, 3, 2], [0, 0, 5],
                       [4, 1, 0], [0, 0, 5]])  # fmt: skip
    np.save(tmp_path / "counts.npy", counts)
    r1 = dsreg.import_labels("ds@v1", tmp_path / "real.json", format="real", registry=reg)
    r2 = dsreg.import_labels("ds@v1", tmp_path / "counts.npy", format="counts", registry=reg)
    dsreg.tag("ds@both", "ds@v1", overlays=[r1.digest, r2.digest], view="multilabel",
              registry=reg)  # fmt: skip
    dsreg.tag("ds@real", "ds@v1", overlays=[r1.digest], view="multilabel", registry=reg)
    rng = np.random.default_rng(4)
    preds = {f"m{j}": rng.integers(0, 3, len(labels)) for j in range(4)}
    for spec in ("ds@real", "ds@both"):
        report = evaluate(spec, preds, registry=reg)
        sig = report.significance
        assert sig is not None
        for m in report.models:
            ml = m.scores["multilabel"]
            got = sig.views["multilabel"].models[m.model]
            assert (sig.views["multilabel"].rows, got.correct) == (ml.rows, ml.correct[1])
            if m.human is not None:
                maj = sig.views["majority"]
                assert maj.rows == m.human.rows
                assert maj.models[m.model].correct == m.human.majority_correct
            else:
                assert "majority" not in sig.views

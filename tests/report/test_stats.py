"""The statistics of dsreg eval against scipy and statsmodels, and against simulation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg.report.stats.core import (
    PatternCounter,
    competition_ranks,
    discordant,
    flip_point,
    flip_removed,
    holm,
    mcnemar_exact,
    mcnemar_exact_many,
    percentile_interval,
    wilson,
)

statsmodels = pytest.importorskip("statsmodels", reason="statsmodels is the oracle")
from statsmodels.stats.contingency_tables import mcnemar  # noqa: E402
from statsmodels.stats.multitest import multipletests  # noqa: E402
from statsmodels.stats.proportion import proportion_confint  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 100_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_equals_statsmodels(kn: tuple[int, int]) -> None:
    k, n = kn
    low, high = wilson(k, n)
    ref_low, ref_high = proportion_confint(k, n, alpha=0.05, method="wilson")
    assert low == pytest.approx(ref_low, abs=1e-12) and high == pytest.approx(ref_high, abs=1e-12)


def test_wilson_of_no_rows_is_none() -> None:
    assert wilson(0, 0) is None


@pytest.mark.parametrize("level", [0.95, 0.9, 0.99])
def test_wilson_at_any_level_is_its_formula_with_scipys_quantile(level: float) -> None:
    """Bit for bit: the default level's quantile is held as a number, the others computed."""
    from scipy.special import ndtri

    z = float(ndtri(0.5 + level / 2))
    for k, n in [(0, 7), (3, 7), (7, 7), (38_526_435, 48_333_555)]:
        p = k / n
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
        assert wilson(k, n, level) == (max(0.0, centre - half), min(1.0, centre + half))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 400), st.integers(0, 400))
def test_mcnemar_exact_equals_statsmodels(b: int, c: int) -> None:
    ref = mcnemar([[10, b], [c, 10]], exact=True).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(min(1.0, ref), rel=1e-9, abs=1e-300)


# statsmodels' multipletests takes a quarter of a second a call here: fewer cases.
@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=40))
def test_holm_equals_statsmodels(p: list[float]) -> None:
    ref = multipletests(p, alpha=0.05, method="holm")[1]
    assert holm(p) == pytest.approx(list(ref), abs=1e-12)


def test_competition_ranks() -> None:
    got = competition_ranks(np.array([[0.9, 0.8, 0.8, 0.1], [0.1, np.nan, 0.3, 0.3]]))
    assert got.tolist() == [[1, 2, 2, 4], [3, 0, 1, 1]]


def test_discordant_counts_rows_one_model_gets_and_another_misses() -> None:
    rng = np.random.default_rng(1)
    rows = rng.integers(0, 2, size=(500, 4)).astype(np.uint8)
    counter = PatternCounter(4)
    counter.add(rows[:200])
    counter.add(rows[200:])
    pat = counter.patterns()
    d = discordant(pat.features, pat.counts)
    for a in range(4):
        for b in range(4):
            assert d[a, b] == int(np.sum((rows[:, a] == 1) & (rows[:, b] == 0)))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 6), st.integers(1, 400), st.integers(0, 2**32 - 1))
def test_pattern_counts_are_the_rows(columns: int, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 2, size=(n, columns)).astype(np.uint8)
    counter = PatternCounter(columns)
    cut = int(rng.integers(0, n + 1))
    counter.add(rows[:cut])
    counter.add(rows[cut:])
    pat = counter.patterns()
    assert pat.rows == n
    assert pat.sums().tolist() == rows.sum(axis=0).tolist()
    assert len({tuple(r) for r in pat.features.tolist()}) == len(pat.counts)


@pytest.mark.parametrize("columns,n", [(3, 5_000), (40, 3_000)])
def test_resampled_sums_follow_the_row_bootstrap(columns: int, n: int) -> None:
    """Resampled sums have the row bootstrap's mean and variance (n p and n p (1 - p) for a 0/1
    feature of share p), for few patterns (multinomial draws) and for many (row draws)."""
    rng = np.random.default_rng(7)
    shares = rng.uniform(0.05, 0.95, size=columns)
    rows = (rng.random((n, columns)) < shares).astype(np.uint8)
    counter = PatternCounter(columns)
    counter.add(rows)
    pat = counter.patterns()
    sums = pat.resample(2_000, seed=3)
    p = rows.mean(axis=0)
    assert np.allclose(sums.mean(axis=0), n * p, rtol=0.01)
    assert np.allclose(sums.var(axis=0), n * p * (1 - p), rtol=0.15)
    assert np.array_equal(sums, pat.resample(2_000, seed=3))  # deterministic for a seed
    assert not np.array_equal(sums, pat.resample(2_000, seed=4))


def test_percentile_interval_leaves_undefined_resamples_out() -> None:
    assert percentile_interval(np.array([np.nan, np.nan])) is None
    low, high = percentile_interval(np.concatenate([np.arange(1000.0), [np.nan] * 5]))
    assert low == pytest.approx(24.975) and high == pytest.approx(974.025)


def test_flip_point_of_orders_that_agree_is_none() -> None:
    assert flip_point(900, 850, 80, 70, rows=1000, errors=100) is None  # A leads on both
    assert flip_point(800, 850, 90, 70, rows=1000, errors=100) is None  # B leads overall


def test_flip_point_matches_simulated_removal() -> None:
    """Remove correctly labelled rows at random: the mean accuracy difference changes sign where
    the closed form says, within the simulation's error."""
    rng = np.random.default_rng(11)
    n_c, n_e = 2_000, 120
    a_c = rng.random(n_c) < 0.93
    b_c = rng.random(n_c) < 0.90
    a_e = rng.random(n_e) < 0.35
    b_e = rng.random(n_e) < 0.70
    point = flip_point(
        int(a_c.sum()), int(b_c.sum()), int(a_e.sum()), int(b_e.sum()), rows=n_c, errors=n_e
    )
    assert point is not None and 0 < point.removed < 1
    assert point.prevalence == pytest.approx(n_e / ((1 - point.removed) * n_c + n_e))

    def mean_gap(removed: float, trials: int = 400) -> tuple[float, float]:
        keep = round((1 - removed) * n_c)
        gaps = np.empty(trials)
        for t in range(trials):
            kept = rng.choice(n_c, size=keep, replace=False)
            gaps[t] = (a_c[kept].sum() - b_c[kept].sum()) + (a_e.sum() - b_e.sum())
        return float(gaps.mean()), float(gaps.std() / np.sqrt(trials))

    before, se_before = mean_gap(max(0.0, point.removed - 0.03))
    after, se_after = mean_gap(min(1.0, point.removed + 0.03))
    assert before > 3 * se_before and after < -3 * se_after
    at, se_at = mean_gap(point.removed)
    assert abs(at) < 4 * se_at + 1  # zero in expectation (one row of rounding)


def test_flip_removed_clips_the_cases_a_resample_can_fall_in() -> None:
    got = flip_removed(
        np.array([950, 900, 800, 930]),
        np.array([900, 850, 850, 900]),
        np.array([40, 80, 40, 40]),
        np.array([84, 70, 84, 40]),
    )
    exact = flip_point(950, 900, 40, 84, rows=1000, errors=100)
    assert exact is not None
    assert got.tolist() == pytest.approx([exact.removed, 1.0, 0.0, 1.0])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 3000)), min_size=1, max_size=20))
def test_mcnemar_exact_many_equals_one_at_a_time(pairs: list[tuple[int, int]]) -> None:
    a, b = (np.array(x) for x in zip(*pairs, strict=True))
    ref = [min(1.0, mcnemar([[10, x], [y, 10]], exact=True).pvalue) for x, y in pairs]
    # statsmodels' p-value underflows to 0.0 where the binomial CDF still gives up to about
    # 6e-259 (10 of 1075 discordant rows: 0.0 against 2.7e-300): both mean "never by chance".
    assert mcnemar_exact_many(a, b).tolist() == pytest.approx(ref, rel=1e-9, abs=1e-250)

"""The review tests' fixtures: a review set (``reviewset.py``) and a real Chromium
(``tests/chromium.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from chromium import launch_persistent, skip_without_chromium
from pairset import PairSet, Review, Untouched, answer, build_pair_set, login
from reviewset import ReviewSet, build_review_set

import dsreg
from dsreg.objects.digest import MIN_PREFIX
from dsreg.objects.hashing import hash_bytes


@pytest.fixture
def review_set(tmp_path: Path) -> ReviewSet:
    return build_review_set(tmp_path)


@pytest.fixture
def make_review_set(tmp_path: Path) -> Callable[..., ReviewSet]:
    def make(name: str = "set", **kwargs: object) -> ReviewSet:
        return build_review_set(tmp_path / name, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture
def browsers(tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """``browsers()`` -> a new browser (a Playwright persistent context on a fresh profile):
    each is a separate reviewer's browser, with its own cookies and localStorage."""
    skip_without_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        opened: list[Any] = []

        def launch() -> Any:
            profile = tmp_path / f"profile-{len(opened)}"
            context = launch_persistent(
                playwright, profile, viewport={"width": 1100, "height": 760}
            )
            context.set_default_timeout(15_000)
            opened.append(context)
            return context

        yield launch
        for context in opened:
            context.close()


@pytest.fixture
def pair_set(tmp_path: Path) -> PairSet:
    return build_pair_set(tmp_path / "pairs")


@pytest.fixture
def review(request: pytest.FixtureRequest) -> Review:
    """Parametrized indirectly with ``"label"`` or ``"pair"`` (``pairset.BOTH_REVIEWS``): a
    label review (``review_set``) or an audit's pair review (``pair_set``), built for the
    test."""
    if request.param == "pair":
        pairs: PairSet = request.getfixturevalue("pair_set")
        return Review(pairs.spec, pairs.registry, True, "same")
    labels: ReviewSet = request.getfixturevalue("review_set")
    return Review(labels.spec, labels.registry, False, "given")


@pytest.fixture(scope="module")
def untouched(
    tmp_path_factory: pytest.TempPathFactory,
    colliding: Callable[[int, Callable[[int], str]], tuple[int, int]],
) -> dict[str, Untouched]:
    """``{"label": ..., "pair": ...}``: a label review and a pair review, each with one vote
    (so that a finish that took a refused value would store an overlay). Built once for the
    module, for tests of refusals only: a refusal writes nothing (each test checks it), so
    every test finds them as built."""
    root = tmp_path_factory.mktemp("untouched")
    labels, pairs = build_review_set(root / "labels"), build_pair_set(root / "pairs")
    made = {}
    for kind, review in (
        ("label", Review(labels.spec, labels.registry, False, "given")),
        ("pair", Review(pairs.spec, pairs.registry, True, "same")),
    ):
        with dsreg.review(review.spec, audit=review.audit, registry=review.registry) as server:
            answer(login(server, server.url), review.fits, reviewer="olga")
        store = dsreg.Registry.find(review.registry).store
        i, j = colliding(MIN_PREFIX, lambda k: hash_bytes(b"blob %d" % k))
        first, second = (store.put_bytes(b"blob %d" % k) for k in (i, j))
        assert first[: 7 + MIN_PREFIX] == second[: 7 + MIN_PREFIX]
        made[kind] = Untouched(review, first[7 : 7 + MIN_PREFIX])
    return made

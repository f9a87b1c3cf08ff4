"""A tag serves only its own dataset's revisions (docs/concepts.md, "Guarantees": a tag never
serves another dataset's data). A tag whose revision belongs to another dataset (a hand edit,
or a clone made by a dsreg that did not check) is refused when read, with an error naming both
datasets, and ``dsreg verify`` names it; moving it with --force repairs it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg.errors import DsregError, IntegrityError
from dsreg.registry.folder import Registry
from dsreg.registry.reader import LocalReader


@pytest.fixture
def two(make_registry: Callable[..., Registry], make_imagefolder: Callable[..., Path]) -> Registry:
    reg = make_registry()
    dsreg.add("pets", make_imagefolder("pets", per_class=2, seed=1), tag="v1", registry=reg)
    dsreg.add("cars", make_imagefolder("cars", per_class=2, seed=2), tag="v1", registry=reg)
    dsreg.tag("cars@cleaned", "cars@v1", view="cleaned", registry=reg)
    return reg


def _hand_edit(reg: Registry, dataset: str, tag: str, digest: str) -> None:
    path = reg.refs.refs / dataset / tag
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(digest + "\n", encoding="ascii")


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    target=st.sampled_from(["cars-v1", "cars-cleaned", "cars-snapshot"]),
    tag=st.sampled_from(["v1", "evil", "cleaned"]),
)
def test_a_tag_naming_another_datasets_revision_is_refused_and_named(
    two: Registry, cli: Callable[..., Any], target: str, tag: str
) -> None:
    reg = two
    cars = reg.refs.get("cars", "v1")
    cleaned = reg.refs.get("cars", "cleaned")
    assert cars is not None and cleaned is not None
    digest = {
        "cars-v1": cars,
        "cars-cleaned": cleaned,
        "cars-snapshot": reg.revision(cars).snapshot,
    }[target]
    good = reg.refs.get("pets", tag)
    _hand_edit(reg, "pets", tag, digest)

    for read in (
        lambda: LocalReader(reg).revision(f"pets@{tag}"),
        lambda: dsreg.open(f"pets@{tag}", registry=reg),
        lambda: dsreg.show(f"pets@{tag}", registry=reg),
    ):
        with pytest.raises(IntegrityError) as e:
            read()
        assert "'pets'" in str(e.value) and "'cars'" in str(e.value)
    shown = cli("show", f"pets@{tag}", "--registry", str(reg.root))
    assert shown.exit_code == 1 and shown.stderr.startswith("Error: ") and "'cars'" in shown.stderr

    res = dsreg.verify(registry=reg)
    named = [p for p in res.problems if f"pets@{tag}" in p.problem]
    assert not res.ok and len(named) == 1 and "'cars'" in named[0].problem
    assert cli("verify", "--registry", str(reg.root)).exit_code == 1
    # cars' own tags, which name the same revision rightly, are served as ever.
    assert dsreg.open("cars@v1", registry=reg).digest == cars

    # The repair the messages advise.
    dsreg.tag(f"pets@{tag}", good or "pets@v1", force=True, registry=reg)
    assert dsreg.verify(registry=reg).ok
    repaired = LocalReader(reg).revision(f"pets@{tag}")
    assert reg.dataset_of(repaired.revision) == "pets" == repaired.dataset
    if good is None:
        (reg.refs.refs / "pets" / tag).unlink()  # as the next example expects it


def test_a_tag_naming_no_revision_is_named_by_verify(two: Registry) -> None:
    """A tag naming an overlay, a table or a payload: refused when read, named by verify."""
    reg = two
    snapshot = reg.snapshot(reg.revision(reg.refs.get("pets", "v1") or "").snapshot)
    _hand_edit(reg, "pets", "table", snapshot.examples)
    with pytest.raises(DsregError):
        LocalReader(reg).revision("pets@table")
    res = dsreg.verify(registry=reg)
    assert any("pets@table" in p.problem for p in res.problems)

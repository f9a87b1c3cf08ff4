"""Tags: named revisions, immutable unless forced, logged; one winner when two race."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import dsreg
from dsreg import AddResult, InvalidInputError, InvalidNameError, Registry, TagExistsError
from dsreg.objects.digest import short
from dsreg.overlays.write import corrections_table, write_overlay

WORKER = Path(__file__).with_name("tag_race_worker.py")
State = Callable[[Path], dict[str, tuple[str, int, str]]]


@pytest.fixture
def reg(
    make_registry: Callable[..., Registry],
    make_imagefolder: Callable[..., Path],
    add_tree: Callable[..., AddResult],
) -> Registry:
    r = make_registry()
    add_tree(r, "ds", make_imagefolder(classes=2, per_class=3))
    return r


def _tag(reg: Registry, dataset: str, tag: str) -> str | None:
    """The revision ``dataset@tag`` names (``dsreg ls``), or None."""
    return {(t.dataset, t.tag): t.revision for t in dsreg.ls(registry=reg)}.get((dataset, tag))


def test_tag_names_a_revision_new_name_first(reg: Registry) -> None:
    original = _tag(reg, "ds", "original")
    assert original is not None
    res = dsreg.tag("ds@paper-2026", "ds@original", registry=reg)
    assert (res.revision, res.previous) == (original, None)
    assert _tag(reg, "ds", "paper-2026") == original
    # By digest prefix too, and with another view: a new revision, stored.
    cleaned = dsreg.tag("ds@cleaned", f"ds@{short(original)}", view="cleaned", registry=reg)
    assert cleaned.revision != original and reg.store.has(cleaned.revision)
    assert dsreg.open("ds@cleaned", registry=reg).view == "cleaned"


def test_tagging_the_same_revision_again_is_a_no_op(reg: Registry) -> None:
    dsreg.tag("ds@v1", "ds@original", registry=reg)
    n = len(dsreg.log("ds", registry=reg))
    dsreg.tag("ds@v1", "ds@original", registry=reg)
    assert len(dsreg.log("ds", registry=reg)) == n


def test_a_tag_is_never_moved_without_force_and_the_log_keeps_the_old_value(
    reg: Registry, registry_state: State
) -> None:
    original = _tag(reg, "ds", "original")
    assert original is not None
    before = registry_state(reg.root)
    with pytest.raises(TagExistsError, match=f"ds@original exists at {short(original)}"):
        dsreg.tag("ds@original", "ds@original", view="cleaned", registry=reg)
    # Not even the new revision manifest was stored.
    assert registry_state(reg.root) == before

    moved = dsreg.tag("ds@original", "ds@original", view="cleaned", force=True, registry=reg)
    assert moved.previous == original
    assert _tag(reg, "ds", "original") == moved.revision
    last = dsreg.log("ds", registry=reg)[-1]
    assert (last.tag, last.old, last.new) == ("original", original, moved.revision)


@pytest.mark.parametrize(
    ("new", "source", "error", "named"),
    [
        ("Ds@x", "ds@original", InvalidNameError, "'Ds'"),
        ("ds@X", "ds@original", InvalidNameError, "'X'"),
        ("ds@a/b", "ds@original", InvalidNameError, "'a/b'"),
        ("ds", "ds@original", InvalidInputError, "'ds'"),
        ("other@x", "ds@original", InvalidInputError, "'ds'"),
    ],
)
def test_bad_tags_are_refused_and_write_nothing(
    reg: Registry,
    registry_state: State,
    new: str,
    source: str,
    error: type[Exception],
    named: str,
) -> None:
    before = registry_state(reg.root)
    with pytest.raises(error) as e:
        dsreg.tag(new, source, view="cleaned", registry=reg)
    assert named in str(e.value)
    assert registry_state(reg.root) == before


def test_an_overlay_of_another_snapshot_is_refused(
    reg: Registry,
    make_imagefolder: Callable[..., Path],
    add_tree: Callable[..., AddResult],
    registry_state: State,
) -> None:
    other = add_tree(reg, "other", make_imagefolder("o", seed=9, classes=2, per_class=2))
    table = corrections_table(
        rows=np.array([0]),
        example_ids=["class0/img000.bin"],
        given_label=np.array([0]),
        suggested_label=np.array([1]),
        verdict=["suspected"],
    )
    producer = {"name": "t", "version": "1", "params": {}, "inputs": {}}
    ov = write_overlay(reg, base=other.snapshot, kind="detected", table=table, producer=producer)
    before = registry_state(reg.root)
    with pytest.raises(InvalidInputError, match=f"overlay {short(ov)} corrects snapshot"):
        dsreg.tag("ds@corrected", "ds@original", overlays=[ov], view="corrected", registry=reg)
    assert registry_state(reg.root) == before


def _race(
    reg: Registry, tmp_path: Path, env: dict[str, str], views: tuple[str, str], rounds: int
) -> list[list[dict]]:
    sync = tmp_path / "sync"
    sync.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(reg.root), str(sync), str(w), str(rounds), view],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for w, view in enumerate(views)
    ]
    try:
        for r in range(rounds):
            deadline = time.monotonic() + 60
            while not all((sync / f"ready-{r}-{w}").exists() for w in range(len(views))):
                assert time.monotonic() < deadline, "workers did not get ready"
                time.sleep(0.001)
            (sync / f"go-{r}").touch()
        outs = [p.communicate(timeout=60)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert all(p.returncode == 0 for p in procs)
    per_worker = [[json.loads(line) for line in out.splitlines()] for out in outs]
    return [[w[r] for w in per_worker] for r in range(rounds)]


def test_two_processes_creating_one_tag_at_once_exactly_one_wins(
    reg: Registry, tmp_path: Path, dsreg_env: Callable[[], dict[str, str]]
) -> None:
    rounds = _race(reg, tmp_path, dsreg_env(), ("original", "cleaned"), rounds=12)
    for r, results in enumerate(rounds):
        winners = [x for x in results if x["ok"]]
        assert len(winners) == 1, results
        assert _tag(reg, "ds", f"race-{r}") == winners[0]["revision"]
        logged = [e for e in dsreg.log("ds", registry=reg) if e.tag == f"race-{r}"]
        assert [(e.old, e.new) for e in logged] == [(None, winners[0]["revision"])]


def test_two_processes_creating_one_tag_at_the_same_revision_log_it_once(
    reg: Registry, tmp_path: Path, dsreg_env: Callable[[], dict[str, str]]
) -> None:
    rounds = _race(reg, tmp_path, dsreg_env(), ("cleaned", "cleaned"), rounds=6)
    for r, results in enumerate(rounds):
        # Naming the revision the tag already holds is not a move: both succeed, one log line.
        assert all(x["ok"] for x in results)
        assert len([e for e in dsreg.log("ds", registry=reg) if e.tag == f"race-{r}"]) == 1


def test_a_log_line_torn_by_a_crash_loses_nothing_after_it(reg: Registry) -> None:
    path = reg.root / "logs" / "ds.jsonl"
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"time": "2026-01-01T00:00:00Z", "user": "x", "dat')  # killed mid-append
    res = dsreg.tag("ds@after-crash", "ds@original", registry=reg)
    log = dsreg.log("ds", registry=reg)
    assert [(e.tag, e.new) for e in log] == [
        ("original", res.revision),
        ("after-crash", res.revision),
    ]

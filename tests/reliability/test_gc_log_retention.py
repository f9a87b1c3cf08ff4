"""What the ref log names stays for the log's expiry (docs/concepts.md, "Guarantees": a cited
revision survives a moved tag). A tag moved with --force, then gc: the old revision still opens
by its digest, payloads and all, until the log's lines expire (``[gc] log_expiry``, default 90
days) or ``gc --prune-log-older-than`` lets them go."""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg.errors import ConfigError, DsregError, InvalidInputError, NotFoundError
from dsreg.objects.store import ObjectStore
from dsreg.registry.folder import Registry
from dsreg.registry.reachable import parse_duration, roots
from dsreg.registry.refs import LogEntry
from tests.conftest import stored_view

DAY = 86400.0


def _payloads(reg: Path, spec: str) -> dict[str, bytes]:
    ds = dsreg.open(spec, registry=reg)
    return {e.example_id: e.read_bytes() for e in ds}


def test_a_force_moved_tag_keeps_its_old_revision_until_the_log_is_pruned(
    cli: Callable[..., Any], make_imagefolder: Callable[..., Path], tmp_path: Path
) -> None:
    assert cli("init").exit_code == 0
    reg = tmp_path / ".dsreg"
    first = json.loads(cli("add", "pets", str(make_imagefolder("a", seed=1)), "--tag", "v1",
                           "--json").stdout)  # fmt: skip
    cited = _payloads(reg, first["revision"])
    moved = cli("add", "pets", str(make_imagefolder("b", seed=2)), "--tag", "v1", "--force")
    assert moved.exit_code == 0, moved.stderr

    gc = cli("gc")
    assert gc.exit_code == 0, gc.stderr
    assert gc.stdout == ""  # nothing removed: the log names the old revision
    assert "named by log lines younger than 90d" in gc.stderr
    # The digest a paper cited still opens, every payload byte for byte.
    assert _payloads(reg, first["revision"]) == cited
    prefix = "pets@" + first["revision"].removeprefix("blake3:")[:12]
    assert _payloads(reg, prefix) == cited  # by the prefix a paper prints, too
    assert cli("verify").exit_code == 0

    dry = json.loads(cli("gc", "--prune-log-older-than", "now", "--dry-run", "--json").stdout)
    assert first["revision"] in dry["removed"] and dry["dry_run"]
    assert _payloads(reg, first["revision"]) == cited
    pruned = cli("gc", "--prune-log-older-than", "now")
    assert pruned.exit_code == 0, pruned.stderr
    assert first["revision"] in pruned.stdout.split()
    with pytest.raises(NotFoundError):
        dsreg.open(first["revision"], registry=reg)
    # The log still tells the history; verify and gc are content with what is left.
    assert [e.old for e in dsreg.log("pets", registry=reg)][-1] == first["revision"]
    assert cli("verify").exit_code == 0
    assert cli("gc").stdout == ""


@pytest.fixture
def template(make_registry: Callable[..., Registry], make_imagefolder: Callable[..., Path]) -> Path:
    """A registry with pets@v1, plus an untagged revision and an overlay named by no tag."""
    reg = make_registry()
    dsreg.add("pets", make_imagefolder(per_class=2), tag="v1", registry=reg)
    return reg.root


def _stray(reg: Registry) -> str:
    rev = stored_view(reg, "pets@v1", "cleaned")
    return rev.digest


def _entry(new: str, age: float, *, event: str = "tag", old: str | None = None) -> LogEntry:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - age))
    return LogEntry(
        time=stamp,
        user="someone",
        dataset="pets",
        tag="v0" if event == "tag" else None,
        old=old,
        new=new,
        command="dsreg tag --force pets@v0 …",
        event=event,
    )


UNITS = {"h": 3600.0, "d": DAY, "w": 7 * DAY}


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    age_hours=st.integers(0, 24 * 400),
    expiry=st.one_of(
        st.tuples(st.integers(1, 500), st.sampled_from(sorted(UNITS))).map(
            lambda t: f"{t[0]}{t[1]}"
        ),
        st.sampled_from(["never", "now", None]),
    ),
    how=st.sampled_from(["config", "prune"]),
    field=st.sampled_from(["old", "new", "overlay"]),
)
def test_a_log_line_keeps_what_it_names_exactly_for_the_expiry(
    template: Path,
    tmp_path_factory: pytest.TempPathFactory,
    age_hours: int,
    expiry: str | None,
    how: str,
    field: str,
) -> None:
    age = age_hours * 3600.0
    limit = parse_duration(expiry or "90d")
    assume(abs(age - limit) > 120)  # a line at the very edge may go either way
    root = tmp_path_factory.mktemp("reg") / "reg"
    shutil.copytree(template, root)
    reg = Registry(root)
    stray = _stray(reg)
    tagged = reg.refs.get("pets", "v1")
    assert tagged is not None
    if field == "overlay":
        entry = _entry(stray, age, event="overlay")
    elif field == "old":
        entry = _entry(tagged, age, old=stray)
    else:
        entry = _entry(stray, age)
    reg.refs.append_log("pets", [entry])
    if how == "config" and expiry is not None:
        cfg = reg.config
        cfg["gc"] = {"log_expiry": expiry}
        reg.write_config(cfg)
        res = dsreg.gc(registry=root)
    elif how == "prune" and expiry is not None:
        res = dsreg.gc(prune_log_older_than=expiry, registry=root)
    else:
        res = dsreg.gc(registry=root)
    kept = age <= limit
    assert reg.store.has(stray) == kept, (age, expiry, how, res)
    assert (stray in roots(reg, expiry=limit)) == kept
    # A tag's revision is never removed, however old its lines.
    assert len(dsreg.open("pets@v1", registry=root)) == 6
    if kept:
        assert dsreg.open(stray, registry=root).digest == stray
        assert res.logged == 1
    assert dsreg.verify(registry=root).ok


def test_an_overlay_made_and_not_applied_is_kept_until_pruned(
    template: Path, tmp_path: Path
) -> None:
    import numpy as np

    reg = Registry(template)
    labels = dsreg.open("pets@v1", registry=reg).labels().column("label").to_numpy()
    probs = np.full((6, 3), 0.05)
    probs[np.arange(6), labels] = 0.9
    probs[0] = [0.05, 0.05, 0.9] if labels[0] != 2 else [0.9, 0.05, 0.05]  # one looks wrong
    np.save(tmp_path / "probs.npy", probs)
    overlay = dsreg.detect("pets@v1", tmp_path / "probs.npy", registry=reg).digest
    table = reg.overlay(overlay).corrections
    assert dsreg.gc(registry=reg).removed == ()
    gone = dsreg.gc(prune_log_older_than="now", registry=reg).removed
    assert {overlay, table} <= set(gone)
    # Made again and applied by a tag: the tag keeps it, however the log is pruned.
    again = dsreg.detect("pets@v1", tmp_path / "probs.npy", tag="cleaned", registry=reg)
    assert again.digest == overlay
    dsreg.gc(prune_log_older_than="now", registry=reg)
    assert reg.store.has(overlay) and reg.store.has(table)
    assert dsreg.verify(registry=reg).ok


def test_log_lines_naming_what_is_not_here_block_nothing(template: Path) -> None:
    """A clone copies the remote's history, which names revisions it never fetched; a line may
    name a payload (a hand edit). gc keeps what is here and walks only manifests."""
    reg = Registry(template)
    absent = "blake3:" + "e" * 64
    blob = min(d for d in list(reg.store) if not reg.is_manifest(d))
    reg.refs.append_log("pets", [_entry(absent, 0), _entry(blob, 0, event="overlay")])
    loose = _stray(reg)
    res = dsreg.gc(registry=reg)
    assert res.removed == (loose,)
    assert reg.store.has(blob)
    assert dsreg.verify(registry=reg).ok


@given(text=st.text(max_size=12))
def test_a_duration_is_a_number_of_seconds_or_a_clear_error(text: str) -> None:
    try:
        seconds = parse_duration(text)
    except InvalidInputError as e:
        assert repr(text) in str(e) and "90d" in str(e)
    else:
        assert seconds >= 0


@pytest.mark.parametrize("value", ["soon", "90", "-1d", "1y", "", "9999999999d"])
def test_a_bad_expiry_or_prune_duration_is_refused_by_name(
    cli: Callable[..., Any], value: str, tmp_path: Path
) -> None:
    assert cli("init").exit_code == 0
    res = cli("gc", "--prune-log-older-than", value)
    assert res.exit_code == 1 and res.stderr.startswith("Error: ") and repr(value) in res.stderr
    reg = Registry(tmp_path / ".dsreg")
    with pytest.raises(ConfigError):
        reg.write_config({**reg.config, "gc": {"log_expiry": value}})
    # Written by hand, it is refused when read, by every command that needs it.
    (reg.root / "config.toml").write_text(f'[gc]\nlog_expiry = "{value}"\n', encoding="utf-8")
    res = cli("gc")
    assert res.exit_code == 1 and "log_expiry" in res.stderr and "Traceback" not in res.stderr
    with pytest.raises(DsregError):
        dsreg.gc(registry=reg)


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs."""


@pytest.fixture
def littered(template: Path, tmp_path: Path) -> tuple[Path, dict[str | None, set[str]]]:
    """The template with garbage a log line names (a moved tag's old value) and garbage nothing
    names; and what an uninterrupted gc removes, with and without a prune."""
    for seed in range(5, 10):  # several moves: whatever the digests, some child sorts first
        tree = _tree(tmp_path / f"t{seed}", seed=seed)
        dsreg.add("pets", tree, tag="v1", force=True, registry=template)
    dsreg.add("cats", _tree(tmp_path / "c", seed=1), registry=template)
    _stray(Registry(template))
    expected = {}
    for prune in ("now", None):
        clean = tmp_path / f"clean-{prune}"
        shutil.copytree(template, clean)
        expected[prune] = set(dsreg.gc(prune_log_older_than=prune, registry=clean).removed)
    assert len(expected["now"]) > len(expected[None]) > 0
    return template, expected


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(after=st.integers(0, 60), prune=st.sampled_from(["now", None]))
def test_a_gc_stopped_midway_leaves_a_registry_that_verifies_and_collects(
    littered: tuple[Path, dict[str | None, set[str]]],
    tmp_path_factory: pytest.TempPathFactory,
    after: int,
    prune: str | None,
) -> None:
    """gc removes what names others first (revisions, overlays, snapshots, then tables and
    payloads), so stopping it after any removal leaves no half-removed revision for a log line
    to name: verify passes, and the next gc ends where an uninterrupted one would."""
    template, expected = littered
    root = tmp_path_factory.mktemp("reg") / "reg"
    shutil.copytree(template, root)
    reg = Registry(root)
    before = set(reg.store)
    real = ObjectStore.remove
    calls = {"n": 0}

    def remove(store: ObjectStore, d: str) -> None:
        if calls["n"] == after:
            raise Killed
        calls["n"] += 1
        real(store, d)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ObjectStore, "remove", remove)
        with contextlib.suppress(Killed):
            dsreg.gc(prune_log_older_than=prune, registry=reg)
    assert dsreg.verify(registry=reg).ok
    dsreg.gc(prune_log_older_than=prune, registry=reg)
    assert set(reg.store) == before - expected[prune]


def _tree(root: Path, *, seed: int) -> Path:
    import numpy as np

    rng = np.random.default_rng(seed)
    for c in ("a", "b"):
        (root / c).mkdir(parents=True, exist_ok=True)
        for i in range(3):
            (root / c / f"{i}.bin").write_bytes(rng.bytes(64 + i))
    return root

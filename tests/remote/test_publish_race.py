"""Two publishes (or pushes) of one registry into one folder at once: the second to reach a tag
finds the remote already holding exactly the value it wanted, which is success ("unchanged"),
not "set by another push"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import dsreg
from dsreg import Registry
from dsreg.registry.reader import LocalReader
from dsreg.remote import transfer
from dsreg.remote.refs import update_ref
from dsreg.remote.store import RemoteStore


@pytest.fixture
def published(make_registry: Callable[..., Registry], make_imagefolder: Callable[..., Path]) -> Any:
    reg = make_registry()
    dsreg.add("pets", make_imagefolder(seed=1), tag="v1", registry=reg)
    dsreg.add("pets", make_imagefolder("tree2", seed=2), tag="v2", registry=reg)
    return reg


def test_a_publish_that_finds_its_tags_set_by_another_is_unchanged(
    published: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Publish A reads each remote tag absent; then, before it writes, publish B of the same
    registry runs whole: A finds every tag at the value it wanted."""
    site = tmp_path / "site"
    real = transfer.update_ref
    other: list[object] = []
    logged: list[bytes] = []

    def racing(*args: Any, **kwargs: Any) -> bool:
        if not other:
            monkeypatch.setattr(transfer, "update_ref", real)
            other.append(dsreg.publish(str(site), registry=published))
            logged.append(_log(site))
            monkeypatch.setattr(transfer, "update_ref", racing)
        return real(*args, **kwargs)

    monkeypatch.setattr(transfer, "update_ref", racing)
    mine = dsreg.publish(str(site), registry=published)
    statuses = {(u.dataset, u.tag): u.status for u in mine.push.refs}
    assert statuses == {("pets", "v1"): "unchanged", ("pets", "v2"): "unchanged"}
    rs = RemoteStore(name="site", url=str(site), options={})
    for tag in ("v1", "v2"):
        assert rs.get_ref("pets", tag) == LocalReader(published).revision(f"pets@{tag}").digest
    assert _log(site) == logged[0]  # the publish that found its tags set wrote no line
    assert (site / "index.html").is_file()


def _log(site: Path) -> bytes:
    return RemoteStore(name="site", url=str(site), options={}).log_bytes("pets")


def test_a_compare_and_swap_finding_the_wanted_value_writes_nothing(tmp_path: Path) -> None:
    rs = RemoteStore(name="r", url=str(tmp_path / "remote"), options={})
    digest = "blake3:" + "ab" * 32
    assert update_ref(rs, "pets", "v1", digest, expected=None, command="first") is True
    log = rs.log_bytes("pets")
    assert update_ref(rs, "pets", "v1", digest, expected=None, command="second") is False
    assert rs.log_bytes("pets") == log and rs.get_ref("pets", "v1") == digest
    with pytest.raises(dsreg.TagExistsError, match=r"set to .* by another push"):
        update_ref(rs, "pets", "v1", "blake3:" + "cd" * 32, expected=None, command="third")


_PUBLISH = """
import json, os, sys, time
import dsreg
registry, site, ready, go = sys.argv[1:]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
out = dsreg.publish(site, registry=registry)
print(json.dumps(sorted(u.status for u in out.push.refs)))
"""


def test_two_publishes_at_once_both_succeed(
    published: Registry, tmp_path: Path, dsreg_env: Callable[..., dict[str, str]]
) -> None:
    for round_ in range(4):
        site, sync = tmp_path / f"site{round_}", tmp_path / f"sync{round_}"
        sync.mkdir()
        procs = [
            subprocess.Popen(
                [
                    *(sys.executable, "-c", _PUBLISH, str(published.root), str(site)),
                    *(str(sync / f"ready{i}"), str(sync / "go")),
                ],
                env=dsreg_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(2)
        ]
        deadline = time.monotonic() + 60
        while len(os.listdir(sync)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        (sync / "go").touch()
        outs = [p.communicate(timeout=300) for p in procs]
        for p, (out, err) in zip(procs, outs, strict=True):
            assert p.returncode == 0, err
            assert set(json.loads(out.strip().splitlines()[-1])) <= {"created", "unchanged"}
        rs = RemoteStore(name="site", url=str(site), options={})
        assert rs.get_ref("pets", "v2") == LocalReader(published).revision("pets@v2").digest

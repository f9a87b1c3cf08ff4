"""JSON nested without end is refused by name, never a crash (docs/concepts.md, "Guarantees":
every JSON document is read within bounds).

A manifest object of 100,000 ``[`` stored under its right digest (a hostile remote, a damaged
disk) made ``show``, ``verify`` and ``gc`` end in a ``RecursionError``, and ``show --remote``,
``clone`` and ``pull`` from a remote holding it as well. Here, hypothesis draws such documents at
random depths around the limit and far beyond it (brackets, objects, strings holding brackets
and quotes, closed or left open), and every command gives one line: ``show`` and ``gc`` an
``Error:``, ``verify`` a problem line naming the object; from a remote the tag is refused and
not written. (The depth scan itself: tests/_util/test_jsonread.py.)
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg.objects.hashing import hash_bytes
from dsreg.registry.folder import Registry

TALLY: Counter[str] = Counter()
# The documented limit (docs/concepts.md, "Guarantees"; dsreg._util.jsonread.MAX_DEPTH).
MAX_DEPTH = 64


def _settings(n: int) -> Any:
    return settings(
        max_examples=n,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    if TALLY:
        print("\nhypothesis examples:", ", ".join(f"{k}: {v}" for k, v in sorted(TALLY.items())))


# One level each: an array, an object, and both with strings of brackets and quotes before the
# next level (which a depth scan must not count).
OPEN = ["[", '{"k":', '[0,"]]}\\"[",', '{"{[\\\\":1,"x":']
CLOSE = {"[": "]", "{": "}"}


@st.composite
def nested(draw: st.DrawFn) -> tuple[bytes, int]:
    """A JSON document nested ``depth`` levels (or a prefix of one: left open), and the depth."""
    depth = draw(st.integers(1, 2 * MAX_DEPTH) | st.integers(1_000, 200_000))
    kinds = draw(st.lists(st.sampled_from(range(len(OPEN))), min_size=1, max_size=8))
    opens = [OPEN[kinds[i % len(kinds)]] for i in range(depth)]
    closed = draw(st.booleans())
    tail = "".join(CLOSE[o[0]] for o in reversed(opens)) if closed else ""
    return ("".join(opens) + "1" + tail).encode(), depth


# -- a hostile manifest in the registry ---------------------------------------------------------


def _one_line_error(res: Any) -> str:
    assert res.exit_code == 1, (res.exit_code, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    err = res.stderr.strip()
    assert err.startswith("Error: ") and "\n" not in err, err
    return err


def _store(root: Path) -> dict[str, int]:
    return {
        p.relative_to(root).as_posix(): p.stat().st_size
        for sub in ("files", "refs", "logs")
        for p in (root / sub).rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A registry with ``ds@v1`` and a folder remote it was pushed to."""
    tmp = tmp_path_factory.mktemp("hostile-json")
    tree = tmp / "tree"
    for i in range(4):
        (tree / f"c{i % 2}").mkdir(parents=True, exist_ok=True)
        (tree / f"c{i % 2}" / f"{i}.bin").write_bytes(b"x%d" % i)
    reg = Registry.init(tmp / "reg")
    dsreg.add("ds", tree, tag="v1", registry=reg)
    dsreg.push(remote=str(tmp / "remote"), registry=reg)
    return reg.root, tmp / "remote"


def _plant(root: Path, doc: bytes) -> str:
    """Store ``doc`` under its digest and point ``ds@evil`` at it; the digest."""
    digest = Registry(root).store.put_bytes(doc)
    (root / "refs" / "ds" / "evil").write_text(f"{digest}\n")
    return str(digest)


@_settings(25)
@given(doc=nested())
def test_a_hostile_manifest_is_named_by_show_verify_and_gc(
    cli: Callable[..., Any], source: tuple[Path, Path], doc: tuple[bytes, int]
) -> None:
    TALLY["hostile manifest, show/verify/gc"] += 1
    data, depth = doc
    root = source[0]
    digest = _plant(root, data)
    try:
        before = _store(root)
        reg = ["--registry", str(root)]
        for args in (["show", "ds@evil"], ["gc"]):
            err = _one_line_error(cli(*args, *reg))
            assert digest.removeprefix("blake3:")[:12] in err, err
            if depth > MAX_DEPTH:
                assert f"JSON nested deeper than {MAX_DEPTH} levels" in err, err
        res = cli("verify", *reg)
        assert res.exit_code == 1 and "Traceback" not in res.stderr, res.stderr
        problems = [line for line in res.stdout.splitlines() if line.startswith(digest)]
        assert problems, res.stdout
        if depth > MAX_DEPTH:
            assert all(f"JSON nested deeper than {MAX_DEPTH}" in p for p in problems), problems
        assert _store(root) == before
    finally:
        (root / "refs" / "ds" / "evil").unlink()


@_settings(15)
@given(doc=nested(), op=st.sampled_from(["show --remote", "clone", "pull"]))
def test_a_hostile_manifest_on_a_remote_is_refused_by_show_clone_and_pull(
    cli: Callable[..., Any],
    source: tuple[Path, Path],
    tmp_path: Path,
    doc: tuple[bytes, int],
    op: str,
) -> None:
    TALLY["hostile manifest on a remote"] += 1
    data, depth = doc
    remote = tmp_path / f"remote-{time.monotonic_ns()}"
    shutil.copytree(source[1], remote)
    digest = hash_bytes(data)  # the remote holds it under its right digest
    hexd = digest.removeprefix("blake3:")
    obj = remote / "files" / "blake3" / hexd[:2] / hexd[2:]
    obj.parent.mkdir(parents=True, exist_ok=True)
    obj.write_bytes(data)
    (remote / "refs" / "ds" / "evil").write_text(f"{digest}\n")
    local = tmp_path / f"local-{time.monotonic_ns()}"
    if op == "show --remote":
        Registry.init(local)
        res = cli("show", "--remote", str(remote), "ds@evil", "--registry", str(local))
    elif op == "clone":
        res = cli("clone", str(remote), str(local))
    else:
        Registry.init(local)
        res = cli("pull", "--remote", str(remote), "--registry", str(local))
    err = _one_line_error(res)
    assert hexd[:12] in err, err
    if depth > MAX_DEPTH:
        assert f"JSON nested deeper than {MAX_DEPTH} levels" in err, err
    assert not (local / "refs" / "ds" / "evil").exists()

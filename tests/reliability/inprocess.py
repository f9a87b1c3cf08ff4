"""The dsreg command line run inside the test's own process, as the kill and full-disk tests
drive it, and the labels dataset both start from. (A module of its own, not conftest: ``from
conftest import`` picks whichever conftest was imported first when several folders run.)"""

from __future__ import annotations

import io
import json
import sys
import traceback
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsreg.cli import main as dsreg_main


@dataclass
class Ran:
    code: int
    out: str
    err: str
    crash: str | None = None  # the traceback of an exception that escaped the command line

    def json(self) -> Any:
        return json.loads(self.out)


def run(*args: str) -> Ran:
    """``dsreg ARGS`` in this process. An exception other than SystemExit is a crash (exit code
    -1): the user would see a traceback, which is kept in ``crash``."""
    out, err = io.StringIO(), io.StringIO()
    code, crash = 0, None
    saved = sys.argv
    sys.argv = ["dsreg", *args]
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                dsreg_main(list(args))
            except SystemExit as e:
                code = int(e.code or 0) if not isinstance(e.code, str) else 1
            except BaseException:  # reported, with its traceback
                code, crash = -1, traceback.format_exc()
    finally:
        sys.argv = saved
    return Ran(code, out.getvalue(), err.getvalue(), crash)


def ok(*args: str) -> Ran:
    """``run``, which must succeed."""
    res = run(*args)
    assert res.code == 0, (args, res.code, res.out, res.err, res.crash)
    return res


def add_labels_args(inp: dict[str, Path]) -> list[str]:
    """The command line that adds dataset ``lab`` from ``inp["labels"]`` and
    ``inp["classes"]``, tagged ``original``."""
    labels, classes = str(inp["labels"]), str(inp["classes"])
    return ["add", "lab", "--labels", labels, "--classes", classes, "--tag", "original"]


def add_labels(reg: Path, inp: dict[str, Path]) -> None:
    """Run :func:`add_labels_args` in registry ``reg``: what most commands start from."""
    ok(*add_labels_args(inp), "--registry", str(reg))


def check_tags(reg: Path, where: str = "") -> None:
    """Every tag names an object the store holds (``where`` says when, in a failure)."""
    refs = reg / "refs"
    for p in refs.rglob("*") if refs.is_dir() else ():
        if p.is_dir():
            continue
        digest = p.read_text().strip()
        assert digest.startswith("blake3:"), (where, p, digest)
        h = digest.removeprefix("blake3:")
        assert (reg / "files" / "blake3" / h[:2] / h[2:]).is_file(), (where, p, digest)

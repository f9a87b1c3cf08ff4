"""Regenerate docs/cli.md from the commands' own help: `.venv/bin/python docs/gen_cli.py`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from dsreg.cli import root_group

HERE = Path(__file__).resolve().parent


def commands(group: Any, prefix: list[str]) -> list[list[str]]:
    """Every leaf command's words (a group is what lists commands)."""
    out: list[list[str]] = []
    ctx = group.context_class(group)
    for name in sorted(group.list_commands(ctx)):
        cmd = group.get_command(ctx, name)
        if hasattr(cmd, "list_commands"):
            out += commands(cmd, [*prefix, name])
        else:
            out.append([*prefix, name])
    return out


def render() -> str:
    """docs/cli.md's text: each command's ``--help``, run as a user runs it."""
    root = root_group()
    env = {**os.environ, "COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"}
    parts = [
        "# CLI reference",
        "",
        "Generated from each command's `--help` by `docs/gen_cli.py`. Every command takes `-h`,",
        "`--json` (machine output on stdout) and `--registry PATH`; errors go to stderr as",
        "`Error: …` with exit status 1.",
        "",
    ]
    for words in commands(root, []):
        text = subprocess.run(
            [sys.executable, "-m", "dsreg", *words, "--help"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
        parts += [f"## dsreg {' '.join(words)}", "", "```", text.rstrip(), "```", ""]
    return "\n".join(parts)


def main() -> None:
    (HERE / "cli.md").write_text(render())


if __name__ == "__main__":
    main()

"""docs/cli.md is what the commands' own help says: regenerated, it does not change."""

from __future__ import annotations

import importlib.util
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_cli_reference_matches_the_commands_help() -> None:
    spec = importlib.util.spec_from_file_location("gen_cli", DOCS / "gen_cli.py")
    assert spec is not None and spec.loader is not None
    gen_cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_cli)
    assert gen_cli.render() == (DOCS / "cli.md").read_text(), (
        "docs/cli.md is out of date: run python docs/gen_cli.py"
    )

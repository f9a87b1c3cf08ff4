"""Overlay commands: detect, overlay ls / show / import-votes."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Overlay commands are added once the detector lands."""

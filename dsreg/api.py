"""The library's entry points, re-exported by ``dsreg``."""

from __future__ import annotations

import os
from pathlib import Path

from dsreg.registry.dataset import Dataset
from dsreg.registry.registry import Registry

__all__ = ["open"]


def open(
    spec: str,
    *,
    registry: Registry | str | os.PathLike[str] | None = None,
    remote: str | None = None,
) -> Dataset:
    """Open a pinned revision: ``"imagenet-val@original"``, ``"imagenet-val@3f9a2c1b7d0e"`` or
    ``"blake3:…"``. The result's ``digest`` is the full revision digest, the thing to cite.

    ``registry`` defaults to ``.dsreg`` found upward from the working directory, else
    ``$DSREG_HOME``. With ``remote``, objects missing locally are fetched from that remote and
    verified before use.
    """
    reg = (
        registry
        if isinstance(registry, Registry)
        else Registry.find(Path(registry) if registry is not None else None)
    )
    if remote is not None:
        from dsreg.registry.remotes import fetch_for_open

        return fetch_for_open(reg, spec, remote)
    return Dataset(reg, reg.resolve(spec))

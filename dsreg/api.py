"""The library's entry points, re-exported by ``dsreg``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsreg.repo.registry import Registry
from dsreg.views.dataset import Dataset

if TYPE_CHECKING:
    import numpy as np

    from dsreg.overlays.create import CreatedOverlay

__all__ = ["detect", "import_votes", "open"]


def _registry(registry: Registry | str | os.PathLike[str] | None) -> Registry:
    if isinstance(registry, Registry):
        return registry
    return Registry.find(Path(registry) if registry is not None else None)


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
    reg = _registry(registry)
    if remote is not None:
        from dsreg.remote.transfer import fetch_for_open

        return fetch_for_open(reg, spec, remote)
    return Dataset(reg, reg.resolve(spec))


def detect(
    spec: str,
    pred_probs: np.ndarray | str | os.PathLike[str],
    *,
    registry: Registry | str | os.PathLike[str] | None = None,
    **options: Any,
) -> CreatedOverlay:
    """Run confident learning on ``spec``'s labels and store a ``detected`` overlay.

    ``pred_probs`` are out-of-sample probabilities aligned with the revision's rows: an
    ``(n, k)`` array, or a ``.npy`` (memory-mapped) or Parquet file (read in chunks). Options are
    those of :func:`dsreg.detector.detector.detect` (``filter_by``, ``rank_by``, ``frac_noise``,
    ``num_to_remove_per_class``, ``min_examples_per_class``, …). The result's ``digest`` names the
    overlay; ``details`` is the full :class:`~dsreg.detector.detector.Detection`.
    """
    from dsreg.overlays.create import detect_overlay

    probs = pred_probs if not isinstance(pred_probs, str | os.PathLike) else Path(pred_probs)
    return detect_overlay(_registry(registry), spec, probs, options=options)


def import_votes(
    spec: str,
    votes: str | os.PathLike[str],
    *,
    format: str = "label-errors",
    threshold: int = 3,
    registry: Registry | str | os.PathLike[str] | None = None,
) -> CreatedOverlay:
    """Store human validation votes about ``spec``'s snapshot as a ``validated`` overlay."""
    from dsreg.overlays.create import votes_overlay

    return votes_overlay(_registry(registry), spec, Path(votes), format=format, threshold=threshold)

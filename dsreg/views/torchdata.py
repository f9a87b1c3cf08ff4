"""``Dataset.to_torch``: a map-style ``torch.utils.data.Dataset`` over a pinned revision.

Safe under ``DataLoader`` workers started by fork or by spawn: what is pickled is the
registry's path, the revision digest and the transforms, never an open registry, table or
connection; each process reopens the revision on its first item (and again after a fork), and
every payload is verified against its digest as it is read. Imports torch: imported only by
``to_torch``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch.utils.data

from dsreg.views.loaders import Opener, Source, decode_image, is_image

__all__ = ["TorchDataset"]


class TorchDataset(torch.utils.data.Dataset[tuple[Any, Any]]):
    """``(payload, label)`` for each row of a revision's view, in order: the payload is a
    Pillow image (``image_mode``, default ``"RGB"`` as torchvision's ImageFolder; ``None``
    keeps the file's own mode) when the example id has an image suffix, else its bytes; a
    label-only dataset gives the example id. ``transform`` and ``target_transform`` apply to
    payload and label; give picklable ones (module-level functions, ``functools.partial``) for
    workers started by spawn."""

    def __init__(
        self,
        ds: Source,
        *,
        reopen: Opener,
        transform: Callable[[Any], Any] | None = None,
        target_transform: Callable[[int], Any] | None = None,
        image_mode: str | None = "RGB",
    ) -> None:
        self.root = str(ds.registry.root)
        self.digest = ds.digest
        self.classes = ds.classes
        self.transform = transform
        self.target_transform = target_transform
        self.image_mode = image_mode
        self._len = len(ds)
        self.reopen = reopen
        self._ds: Source | None = ds
        self._pid = os.getpid()

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        return f"<dsreg TorchDataset {self.digest[:19]} rows={self._len}>"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_ds"] = None  # reopened by the process that unpickles it
        return state

    def dataset(self) -> Source:
        """The revision, opened by this process (reopened after a fork)."""
        if self._ds is None or self._pid != os.getpid():
            self._ds = self.reopen(self.root, self.digest)
            self._pid = os.getpid()
        return self._ds

    @property
    def targets(self) -> list[int]:
        """The view's labels, in order (torchvision's name)."""
        return [int(x) for x in self.dataset().view_rows().label]

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        ex = self.dataset()[int(i)]
        payload: Any
        if ex.blob is None:
            payload = ex.example_id
        elif is_image(ex.example_id):
            payload = decode_image(ex.read_bytes(), ex.example_id, mode=self.image_mode)
        else:
            payload = ex.read_bytes()
        label: Any = ex.label
        if self.transform is not None:
            payload = self.transform(payload)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return payload, label

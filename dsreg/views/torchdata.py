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

from dsreg.errors import InvalidInputError
from dsreg.views.loaders import Opener, Source, decode_image, is_image, rated_array

__all__ = ["TARGETS", "TorchDataset"]

#: What a record's target may be: the served label, the raters' counts, the label set.
TARGETS = ("label", "label_counts", "labels")


def _targets(ds: Source, target: str | tuple[str, ...]) -> tuple[str, ...]:
    """``target`` as names, each one the revision serves (``InvalidInputError`` otherwise)."""
    names = (target,) if isinstance(target, str) else tuple(target)
    served = {"label", *ds.rated, *(("labels",) if ds.view == "multilabel" else ())}
    for name in names:
        if name not in TARGETS:
            raise InvalidInputError(f"unknown target {name!r}; choose one of {', '.join(TARGETS)}")
        if name not in served:
            raise InvalidInputError(
                f"target {name!r}: revision {ds.digest[:19]} holds no {name} (its overlays carry "
                f"{', '.join(sorted(served - {'label'})) or 'none'}); import a relabeling that "
                "has them (docs/relabelings.md)"
            )
    if not names:
        raise InvalidInputError("target names no column; give 'label', or a tuple of TARGETS")
    return names


class TorchDataset(torch.utils.data.Dataset[tuple[Any, Any]]):
    """``(payload, target)`` for each row of a revision's view, in order: the payload is a
    Pillow image (``image_mode``, default ``"RGB"`` as torchvision's ImageFolder; ``None``
    keeps the file's own mode) when the example id has an image suffix, else its bytes; a
    label-only dataset gives the example id. The target is the label, the raters' counts
    (int32, one per class) or the label set (int8 multi-hot), or a tuple of them (``target``;
    -1 throughout where the row holds none). ``transform`` and ``target_transform`` apply to
    payload and target; give picklable ones (module-level functions, ``functools.partial``) for
    workers started by spawn."""

    def __init__(
        self,
        ds: Source,
        *,
        reopen: Opener,
        transform: Callable[[Any], Any] | None = None,
        target_transform: Callable[[Any], Any] | None = None,
        image_mode: str | None = "RGB",
        target: str | tuple[str, ...] = "label",
    ) -> None:
        self.target = _targets(ds, target)
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
        values = tuple(self._value(ex, name) for name in self.target)
        label: Any = values[0] if len(values) == 1 else values
        if self.transform is not None:
            payload = self.transform(payload)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return payload, label

    def _value(self, ex: Any, name: str) -> Any:
        if name == "label":
            return ex.label
        import pyarrow as pa

        lists = pa.array([getattr(ex, name)], pa.list_(pa.int32()))
        return torch.from_numpy(rated_array(name, lists, len(self.classes))[0])

"""Which snapshot row a record of an external file names: by example id, by ImageNet validation
file name, or by position. One place for the matching every importer of corrections uses.

All of it is vectorised in Arrow and numpy: 50,000 ids match in a few milliseconds.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsreg.model.tables import as_numpy

__all__ = ["IMAGENET_VAL", "imagenet_val_numbers", "rows_by_id"]

# The ImageNet (ILSVRC2012) validation images are numbered by file name from 1 to 50,000; a
# snapshot's ids may hold them under any folders (``val/n01440764/ILSVRC2012_val_00000293.JPEG``
# in the ImageFolder layout, which sorts them by class, not by number).
IMAGENET_VAL: Final = r"(?:^|/)ILSVRC2012_val_(?P<n>[0-9]{8})\.(?:JPEG|jpeg|JPG|jpg|png|PNG)$"


def rows_by_id(snapshot_ids: pa.Array | pa.ChunkedArray, keys: pa.Array) -> np.ndarray:
    """The snapshot row of each of ``keys`` (example ids), -1 where none has that id
    (snapshot ids are unique, so a key names at most one row)."""
    if isinstance(snapshot_ids, pa.ChunkedArray):
        snapshot_ids = snapshot_ids.combine_chunks()
    idx = pc.index_in(pc.cast(keys, pa.string()), value_set=snapshot_ids.cast(pa.string()))
    return as_numpy(idx, fill=-1).astype(np.int64, copy=False)


def imagenet_val_numbers(snapshot_ids: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """Each row's ImageNet validation image number (1 for ``ILSVRC2012_val_00000001.JPEG``),
    or None unless every example id ends in such a file name and no number comes twice."""
    if isinstance(snapshot_ids, pa.ChunkedArray):
        snapshot_ids = snapshot_ids.combine_chunks()
    if not len(snapshot_ids):
        return None
    found = pc.extract_regex(snapshot_ids, IMAGENET_VAL)
    if found.null_count:
        return None
    digits = pc.struct_field(found, "n")
    numbers = as_numpy(pc.cast(digits, pa.int64())).astype(np.int64, copy=False)
    if len(np.unique(numbers)) != len(numbers):
        return None
    return numbers

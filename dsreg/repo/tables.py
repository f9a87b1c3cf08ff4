"""The registry's Parquet tables, read back: re-hashed before they are parsed, checked against
the layout their manifest promises.

Both views and overlays read tables; they meet here, below both of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from dsreg.errors import ManifestError
from dsreg.model.corrections import CORRECTIONS_SCHEMA
from dsreg.model.manifests import Overlay, Snapshot
from dsreg.model.tables import read_parquet_bytes
from dsreg.objects.digest import short
from dsreg.repo.registry import Registry

__all__ = ["read_corrections", "read_examples"]


def read_examples(
    reg: Registry, snap: Snapshot, *, columns: Sequence[str] | None = None
) -> pa.Table:
    """A snapshot's examples table, re-hashed before it is parsed."""
    data = reg.store.read_bytes(snap.examples)
    return read_parquet_bytes(data, digest=snap.examples, columns=columns)


def read_corrections(reg: Registry, overlay: Overlay) -> pa.Table:
    """An overlay's corrections table, re-hashed before it is parsed."""
    data = reg.store.read_bytes(overlay.corrections)
    table = read_parquet_bytes(data, digest=overlay.corrections)
    if table.schema != CORRECTIONS_SCHEMA:
        raise ManifestError(
            f"corrections table {short(overlay.corrections)} does not have the overlay schema"
        )
    return table

"""``Dataset._repr_html_``: a revision as a notebook shows it, a small HTML table.

Every value written into the HTML (dataset name, tag, class names, example ids, metadata) is
escaped: an example id or a class name is data from a file, and a notebook renders what it is
given. Cheap at any size: the counts come from the manifests and ``len`` (the rows overlays
name), the first rows from one record batch of ``iter_batches``.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from dsreg.formats.manifests import Overlay, Snapshot

__all__ = ["Shown", "dataset_html"]


class Shown(Protocol):
    """What the summary reads of a ``dsreg.views.dataset.Dataset`` (not imported: its
    ``_repr_html_`` calls this module)."""

    digest: str
    snapshot: Snapshot
    overlays: tuple[tuple[str, Overlay], ...]

    @property
    def name(self) -> str: ...
    @property
    def tag(self) -> str | None: ...
    @property
    def view(self) -> str: ...
    @property
    def classes(self) -> tuple[str, ...]: ...
    @property
    def rated(self) -> tuple[str, ...]: ...
    def __len__(self) -> int: ...
    def iter_batches(self, batch_size: int = ...) -> Iterator[pa.RecordBatch]: ...


FIRST_ROWS = 5
SHOWN_CLASSES = 10
_CELL = 60  # characters of a row's value shown in a cell; the rest as "…"


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    if len(text) > _CELL:
        text = text[: _CELL - 1] + "…"
    return html.escape(text)


def _summary(ds: Shown) -> list[tuple[str, str]]:
    classes = ds.classes
    shown = ", ".join(classes[:SHOWN_CLASSES]) + (", …" if len(classes) > SHOWN_CLASSES else "")
    overlays = ", ".join(f"{ov.kind} {d[:19]}" for d, ov in ds.overlays) or "none"
    rated = ", ".join(ds.rated) or "none"
    return [
        ("dataset", ds.name),
        ("tag", ds.tag or "-"),
        ("revision", ds.digest),
        ("view", ds.view),
        ("rows", f"{len(ds)} of {ds.snapshot.rows}"),
        ("classes", f"{len(classes)}: {shown}"),
        ("overlays", overlays),
        ("label sets and counts", rated),
    ]


def dataset_html(ds: Shown, *, rows: int = FIRST_ROWS) -> str:
    """The revision's summary and its first ``rows`` rows as an escaped HTML table."""
    parts = ["<div class='dsreg-dataset'><table>"]
    for key, value in _summary(ds):
        # Whole (the digest is 71 characters), escaped.
        parts.append(
            f"<tr><th style='text-align:left'>{key}</th><td>{html.escape(value)}</td></tr>"
        )
    parts.append("</table>")
    batch = next(iter(ds.iter_batches(rows)), None) if rows > 0 else None
    if batch is not None:
        names = [n for n in batch.schema.names if n not in ("blob", "size")]
        parts.append(f"<table><caption>first {batch.num_rows} rows</caption><tr>")
        parts.extend(f"<th>{html.escape(n)}</th>" for n in names)
        parts.append("</tr>")
        for record in batch.select(names).to_pylist():
            cells = "".join(f"<td>{_cell(record[n])}</td>" for n in names)
            parts.append(f"<tr>{cells}</tr>")
        parts.append("</table>")
    parts.append("</div>")
    return "".join(parts)

"""The record sets of a revision's Croissant document: ``classes`` (the class names inline),
``labels`` (the view, one field per column of ``Dataset.labels()``) and ``payloads`` (the rows
of the payloads' CSV), with the ids of the two files they read (``VIEW_FILE``,
``PAYLOADS_FILE``), which the document's ``distribution`` names whatever URL it gives them."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

__all__ = [
    "PAYLOADS_FILE",
    "VIEW_FILE",
    "classes_record_set",
    "payloads_record_set",
    "view_record_set",
]

VIEW_FILE = "labels.parquet"
PAYLOADS_FILE = "payloads.csv"


def _field_type(t: pa.DataType) -> tuple[str, bool]:
    """The Croissant data type of an Arrow column's values, and whether it is a list."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _field_type(t.value_type)[0], True
    if pa.types.is_dictionary(t):
        return _field_type(t.value_type)
    if pa.types.is_boolean(t):
        return "sc:Boolean", False
    if pa.types.is_integer(t):
        return "sc:Integer", False
    if pa.types.is_floating(t):
        return "sc:Float", False
    if pa.types.is_timestamp(t):
        return "sc:DateTime", False
    if pa.types.is_date(t):
        return "sc:Date", False
    return "sc:Text", False


_DESCRIPTIONS = {
    "row": "The example's position in the snapshot's examples table.",
    "example_id": "The example's id, unique in the snapshot.",
    "label": "The label the view serves (class index; see the classes record set).",
    "label_name": "The name of the served label's class.",
    "given_label": "The label the snapshot gives the example (class index).",
    "verdict": "The verdict of the last overlay naming the row, null where none does.",
    "blob": "The BLAKE3 digest of the example's payload (see the payloads record set).",
    "size": "The payload's size in bytes.",
    "labels": (
        "The example's label set, class indexes (see the classes record set): every class that "
        "fits, as the last overlay naming the row gives it (a relabeling's set, e.g. ImageNet "
        "ReaL's) or as the multilabel view derives it; [] where none fits, null where no set "
        "is recorded."
    ),
    "label_counts": (
        "The raters' counts per class (e.g. CIFAR-10H's): one count per class, position i "
        "counting class i of the classes record set; null where no overlay recorded counts."
    ),
}


def _view_fields(table: pa.Table, n_classes: int) -> list[dict[str, Any]]:
    fields = []
    for name, col in zip(table.column_names, table.columns, strict=True):
        dtype, is_list = _field_type(col.type)
        f: dict[str, Any] = {
            "@type": "cr:Field",
            "@id": f"labels/{name}",
            "name": name,
            "description": _DESCRIPTIONS.get(name, f"The snapshot's metadata column {name}."),
            "dataType": dtype,
            "source": {"fileObject": {"@id": VIEW_FILE}, "extract": {"column": name}},
        }
        if name in ("label", "given_label", "labels") and n_classes:
            f["references"] = {"field": {"@id": "classes/index"}}
        if name in ("label", "labels"):
            f["dataType"] = [dtype, "cr:Label"]
        if is_list:
            # Croissant 1.1's arrays: "-1" a list of any length (a label set); the raters'
            # counts always hold one count per class.
            f["isArray"] = True
            f["arrayShape"] = str(n_classes) if name == "label_counts" and n_classes else "-1"
        fields.append(f)
    return fields


def classes_record_set(classes: tuple[str, ...]) -> dict[str, Any]:
    """The ``classes`` record set: an enumeration of the class names, inline."""
    return {
        "@type": "cr:RecordSet",
        "@id": "classes",
        "name": "classes",
        "description": "The class names; a label is an index into them.",
        "dataType": "sc:Enumeration",
        "key": {"@id": "classes/index"},
        "field": [
            {"@type": "cr:Field", "@id": "classes/index", "name": "index",
             "dataType": "sc:Integer"},
            {"@type": "cr:Field", "@id": "classes/name", "name": "name", "dataType": "sc:Text"},
        ],
        "data": [
            {"classes/index": i, "classes/name": c} for i, c in enumerate(classes)
        ],
    }  # fmt: skip


def view_record_set(table: pa.Table, view: str, n_classes: int) -> dict[str, Any]:
    """The ``labels`` record set of a view served as ``table`` (``Dataset.labels()``)."""
    return {
        "@type": "cr:RecordSet",
        "@id": "labels",
        "name": "labels",
        "description": (
            f"The {view} view of the revision: one record per example, as "
            "dsreg.open(spec).labels() serves it."
        ),
        "key": {"@id": "labels/row"},
        "field": _view_fields(table, n_classes),
    }


def payloads_record_set() -> dict[str, Any]:
    """The ``payloads`` record set: the rows of the payloads' CSV."""

    def field(name: str, dtype: str, description: str) -> dict[str, Any]:
        return {
            "@type": "cr:Field",
            "@id": f"payloads/{name}",
            "name": name,
            "description": description,
            "dataType": dtype,
            "source": {"fileObject": {"@id": PAYLOADS_FILE}, "extract": {"column": name}},
        }

    return {
        "@type": "cr:RecordSet",
        "@id": "payloads",
        "name": "payloads",
        "description": "One record per distinct payload of the view.",
        "key": {"@id": "payloads/blob"},
        "field": [
            field("blob", "sc:Text", "The payload's BLAKE3 digest (the view's blob column)."),
            field("sha256", "sc:Text", "The payload's sha256."),
            field("size", "sc:Integer", "The payload's size in bytes."),
            field(
                "path",
                "sc:Text",
                "Where the payload is: its URL, or its path relative to the root of the files "
                "(the export's folder, the published site's root).",
            ),
        ],
    }

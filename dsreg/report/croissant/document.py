"""Croissant 1.1 JSON-LD for a revision (``dsreg export --format croissant``).

The document describes what ``dsreg export`` writes beside it, relative to its own folder:

- ``labels.parquet``, the view as ``Dataset.labels()`` serves it (the dictionary columns as
  plain strings), a ``FileObject`` with its sha256;
- the snapshot's examples table and each overlay's corrections table, ``FileObject``s under
  ``tables/`` named by their BLAKE3 digest (``files/blake3`` layout), with their sha256;
- the payloads, a ``FileSet`` under ``payloads/`` in the same layout, and ``payloads.csv``
  naming each payload's BLAKE3 digest, sha256, size and path (a ``FileObject`` with its
  sha256, so every payload's bytes are pinned by the document).

Record sets: ``classes`` (an ``sc:Enumeration`` of the class names, index and name), the
view (``labels``: one field per column of ``Dataset.labels()``, ``label`` and ``given_label``
referencing ``classes``; where the revision's overlays carry them, the label sets ``labels``
and the raters' counts ``label_counts`` as array fields, ``isArray`` with ``arrayShape`` "-1"
and the number of classes) and ``payloads`` (the rows of ``payloads.csv``). Reading ``labels``
with ``mlcroissant`` gives ``dsreg.open(spec).labels()`` row for row.

The revision digest is the document's ``identifier``; a corrected revision names its original
revision (the snapshot, no overlay, the original view) as ``prov:wasDerivedFrom`` and
``isBasedOn``, and each overlay as a ``prov:Activity`` (``provenance``); ``citeAs`` is
``dsreg cite``'s BibTeX, crediting the dataset and every overlay applied.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from dsreg.objects.digest import object_relpath
from dsreg.registry.reader import Resolved
from dsreg.report.cite import cite
from dsreg.report.croissant.provenance import (
    annotation_fields,
    derived_from,
    object_sha256,
    revision_iri,
)
from dsreg.views.dataset import Dataset

__all__ = [
    "CONFORMS_TO",
    "CONTEXT",
    "PAYLOADS_DIR",
    "PAYLOADS_FILE",
    "TABLES_DIR",
    "VIEW_FILE",
    "Croissant",
    "build",
    "croissant_metadata",
]

CONFORMS_TO = "http://mlcommons.org/croissant/1.1"

# The context of the specification's appendix, with PROV-O for the revision's provenance.
CONTEXT: dict[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "sc": "https://schema.org/",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "dct": "http://purl.org/dc/terms/",
    "prov": "http://www.w3.org/ns/prov#",
    "annotation": "cr:annotation",
    "arrayShape": "cr:arrayShape",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "containedIn": "cr:containedIn",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "excludes": "cr:excludes",
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isArray": "cr:isArray",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "readLines": "cr:readLines",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sdVersion": "cr:sdVersion",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
    "unArchive": "cr:unArchive",
    "value": "cr:value",
}

VIEW_FILE = "labels.parquet"
PAYLOADS_FILE = "payloads.csv"
PAYLOADS_DIR = "payloads"
TABLES_DIR = "tables"


@dataclass(frozen=True, slots=True)
class Croissant:
    """A revision's Croissant document and the files it describes, by path relative to it:
    ``files`` maps a path to its bytes (the view's Parquet, the payloads' CSV), ``objects`` a
    path to the BLAKE3 digest of the store object copied there."""

    document: dict[str, Any]
    files: dict[str, bytes]
    objects: dict[str, str]
    rows: int  # the view's


def croissant_metadata(
    r: Resolved, *, authors: tuple[str, ...] = (), url: str | None = None
) -> dict[str, Any]:
    """The Croissant 1.1 JSON-LD document of revision ``r`` (a dict ready for
    ``json.dumps``), describing the files ``dsreg export --format croissant`` writes beside
    it (module docstring); ``authors`` are its creators (default: the dataset's
    maintainers), ``url`` where readers fetch it."""
    return build(r, authors=authors, url=url).document


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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


def _plain(table: pa.Table) -> pa.Table:
    """Dictionary columns decoded to their values: what a Parquet reader without Arrow's
    dictionary types reads back the same."""
    cols = [
        c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns
    ]
    return pa.table(cols, names=table.column_names)


def _parquet_bytes(table: pa.Table) -> bytes:
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


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


def _classes_record_set(classes: tuple[str, ...]) -> dict[str, Any]:
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


def _file_object(
    at: str, name: str, *, sha256: str, size: int, media: str, description: str
) -> dict[str, Any]:
    return {
        "@type": "cr:FileObject",
        "@id": at,
        "name": name,
        "description": description,
        "contentUrl": at,
        "contentSize": f"{size} B",
        "encodingFormat": media,
        "sha256": sha256,
    }


def _written(at: str, data: bytes, media: str, description: str) -> dict[str, Any]:
    """The ``FileObject`` of a file the export writes from ``data`` (named as it is)."""
    return _file_object(
        at, at, sha256=_sha256(data), size=len(data), media=media, description=description
    )


def _object_path(folder: str, digest: str) -> str:
    return f"{folder}/{object_relpath(digest)}"


def _payloads(table: pa.Table) -> dict[str, int]:
    """The view's distinct payloads (digest -> size), in first appearance order."""
    if "blob" not in table.column_names:
        return {}
    seen: dict[str, int] = {}
    for blob, size in zip(
        table.column("blob").to_pylist(), table.column("size").to_pylist(), strict=True
    ):
        if blob is not None and blob not in seen:
            seen[blob] = int(size)
    return seen


def _payloads_csv(payloads: dict[str, int], sha256: dict[str, str]) -> bytes:
    """``payloads.csv``: blob, sha256, size, path; a line per payload."""
    import pyarrow.csv as pacsv

    t = pa.table(
        {
            "blob": list(payloads),
            "sha256": [sha256[d] for d in payloads],
            "size": pa.array(list(payloads.values()), pa.int64()),
            "path": [_object_path(PAYLOADS_DIR, d) for d in payloads],
        }
    )
    buf = io.BytesIO()
    pacsv.write_csv(t, buf)
    return buf.getvalue()


def build(r: Resolved, *, authors: tuple[str, ...] = (), url: str | None = None) -> Croissant:
    """The document of revision ``r`` and the files it describes (``Croissant``)."""
    registry = r.registry
    ds = Dataset(r)
    table = _plain(ds.labels())
    view_bytes = _parquet_bytes(table)
    files: dict[str, bytes] = {VIEW_FILE: view_bytes}
    distribution = [
        _written(
            VIEW_FILE,
            view_bytes,
            "application/x-parquet",
            f"The {ds.view} view of revision {r.digest}, one row per example.",
        )
    ]
    tables = [("examples", ds.snapshot.examples)] + [
        (f"corrections {i}", ov.corrections) for i, (_, ov) in enumerate(ds.overlays, 1)
    ]
    payloads = _payloads(table)
    sha256 = object_sha256(registry, [d for _, d in tables] + list(payloads))
    objects: dict[str, str] = {}
    for what, digest in tables:
        at = _object_path(TABLES_DIR, digest)
        objects[at] = digest
        distribution.append(
            _file_object(
                at,
                f"{what} table",
                sha256=sha256[digest],
                size=registry.store.path(digest).stat().st_size,
                media="application/x-parquet",
                description=f"The dsreg {what} table, object {digest}.",
            )
        )
    record_sets = [_classes_record_set(ds.classes), _view_record_set(table, ds)]
    if payloads:
        csv = _payloads_csv(payloads, sha256)
        files[PAYLOADS_FILE] = csv
        objects.update({_object_path(PAYLOADS_DIR, d): d for d in payloads})
        distribution += _payload_resources(csv)
        record_sets.append(_payloads_record_set())
    doc = _dataset(r, ds, authors, url)
    doc["distribution"] = distribution
    doc["recordSet"] = record_sets
    return Croissant(document=doc, files=files, objects=objects, rows=table.num_rows)


def _view_record_set(table: pa.Table, ds: Dataset) -> dict[str, Any]:
    return {
        "@type": "cr:RecordSet",
        "@id": "labels",
        "name": "labels",
        "description": (
            f"The {ds.view} view of the revision: one record per example, as "
            "dsreg.open(spec).labels() serves it."
        ),
        "key": {"@id": "labels/row"},
        "field": _view_fields(table, len(ds.classes)),
    }


def _payload_resources(csv: bytes) -> list[dict[str, Any]]:
    return [
        _written(
            PAYLOADS_FILE, csv, "text/csv", "Each payload's BLAKE3 digest, sha256, size and path."
        ),
        {
            "@type": "cr:FileSet",
            "@id": "payload-files",
            "name": "payload files",
            "description": (
                "The examples' payloads, each at payloads/blake3/<first two hex digits>/<the "
                "rest> of its BLAKE3 digest; payloads.csv gives each one's sha256."
            ),
            "encodingFormat": "application/octet-stream",
            "includes": f"{PAYLOADS_DIR}/blake3/*/*",
        },
    ]


def _payloads_record_set() -> dict[str, Any]:
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
            field("path", "sc:Text", "Where the payload is, relative to this document."),
        ],
    }


def _dataset(r: Resolved, ds: Dataset, authors: tuple[str, ...], url: str | None) -> dict[str, Any]:
    reg = r.registry
    c = cite(r, authors=authors, url=url)
    creators = [
        {"@type": "sc:Person" if "," in a else "sc:Organization", "name": a} for a in authors
    ] or [{"@type": "sc:Organization", "name": f"{r.dataset} maintainers"}]
    overlays = f", overlays {', '.join(d for d, _ in ds.overlays)}" if ds.overlays else ""
    doc: dict[str, Any] = {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "name": c.name,
        "description": (
            f"The {ds.view} view ({c.rows} rows, {len(ds.classes)} classes) of dataset "
            f"{r.dataset}: dsreg revision {r.digest}, snapshot {ds.snapshot_digest}{overlays}."
        ),
        "conformsTo": CONFORMS_TO,
        "identifier": r.digest,
        "sameAs": revision_iri(r.digest),
        "url": c.remote or revision_iri(r.digest),
        "creator": creators,
        "citeAs": c.bibtex(),
        "keywords": ["dsreg", r.dataset, ds.view],
    }
    if c.date is not None:
        doc["datePublished"] = c.date
    doc.update(derived_from(reg, r.revision))
    doc.update(annotation_fields(reg, r.revision))
    return doc

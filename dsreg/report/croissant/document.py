"""Croissant 1.1 JSON-LD for a revision (``dsreg export --format croissant``, and the pages of
``dsreg publish``).

The document describes what ``dsreg export`` writes beside it, relative to its own folder
(``Layout``: a published site puts the same files elsewhere and names them by URL):

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

The revision digest is the document's ``identifier`` and its ``version`` (as in the citation and
the DataCite record); its ``license`` is the snapshot's (``source.license``) as a URL (an SPDX
identifier's page on the SPDX list); a corrected revision names its original
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

from dsreg.formats.credit import license_url
from dsreg.objects.digest import object_relpath
from dsreg.registry.reader import Resolved
from dsreg.report.cite import Citation, cite
from dsreg.report.croissant.provenance import (
    annotation_fields,
    derived_from,
    object_sha256,
    revision_iri,
)
from dsreg.report.croissant.recordsets import (
    PAYLOADS_FILE,
    VIEW_FILE,
    classes_record_set,
    payloads_record_set,
    view_record_set,
)
from dsreg.views.dataset import Dataset

__all__ = [
    "CONFORMS_TO",
    "CONTEXT",
    "EXPORT",
    "PAYLOADS_DIR",
    "PAYLOADS_FILE",
    "TABLES_DIR",
    "VIEW_FILE",
    "Croissant",
    "Layout",
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

PAYLOADS_DIR = "payloads"
TABLES_DIR = "tables"


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """Where the files a document describes are, as paths below the root of the files (which
    ``Croissant.placed`` puts behind a base: nothing for the export's folder, where the
    document is at that root, or the URL of a published site). ``view`` and ``payload_list``
    are the view's Parquet and the payloads' CSV, ``{sha256}`` in them standing for the file's
    sha256; ``tables`` and ``payloads`` the folders holding the store's objects in the
    ``blake3/ab/cdef…`` layout; ``listed`` is put before each payload's path in the CSV's
    ``path`` column; ``file_set``: whether the payloads are named as a ``FileSet`` too (a
    folder a reader can list; a web server's cannot be).

    ``EXPORT`` is ``dsreg export --format croissant``'s folder."""

    view: str = VIEW_FILE
    payload_list: str = PAYLOADS_FILE
    tables: str = TABLES_DIR
    payloads: str = PAYLOADS_DIR
    listed: str = ""
    file_set: bool = True

    def object_path(self, folder: str, digest: str) -> str:
        return f"{folder}/{object_relpath(digest)}"


EXPORT = Layout()


@dataclass(frozen=True, slots=True)
class Croissant:
    """A revision's Croissant document and the files it describes, by path below the root of
    the files (``Layout``): ``files`` maps a path to its bytes (the view's Parquet, the
    payloads' CSV), ``objects`` a path to the BLAKE3 digest of the store object there. The
    document's ``contentUrl``s are those paths: ``placed`` puts them behind a base."""

    document: dict[str, Any]
    files: dict[str, bytes]
    objects: dict[str, str]
    rows: int  # the view's

    def placed(
        self, base: str, *, url: str | None = None, same_as: str | None = None
    ) -> dict[str, Any]:
        """The document with ``base`` (a URL ending in ``/``, or a relative path to the root
        of the files) before each ``contentUrl``, and ``url`` and ``sameAs`` those given."""
        doc = dict(self.document)
        doc["distribution"] = [
            {**d, "contentUrl": base + d["contentUrl"]} if "contentUrl" in d else d
            for d in self.document["distribution"]
        ]
        if url is not None:
            doc["url"] = url
        if same_as is not None:
            doc["sameAs"] = same_as
        return doc


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


def _file_object(
    at: str, name: str, *, sha256: str, size: int, media: str, description: str, url: str
) -> dict[str, Any]:
    """A ``FileObject`` (Croissant's subclass of schema.org's ``DataDownload``): ``at`` its
    id, ``url`` its ``contentUrl``."""
    return {
        "@type": "cr:FileObject",
        "@id": at,
        "name": name,
        "description": description,
        "contentUrl": url,
        "contentSize": f"{size} B",
        "encodingFormat": media,
        "sha256": sha256,
    }


def _written(at: str, data: bytes, url: str, *, media: str, description: str) -> dict[str, Any]:
    """The ``FileObject`` of a file written from ``data``, named ``at``, at ``url``."""
    return _file_object(
        at, at, sha256=_sha256(data), size=len(data), media=media, description=description,
        url=url,
    )  # fmt: skip


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


def _payloads_csv(payloads: dict[str, int], sha256: dict[str, str], layout: Layout) -> bytes:
    """The payloads' CSV: blob, sha256, size, path; a line per payload."""
    import pyarrow.csv as pacsv

    t = pa.table(
        {
            "blob": list(payloads),
            "sha256": [sha256[d] for d in payloads],
            "size": pa.array(list(payloads.values()), pa.int64()),
            "path": [layout.listed + layout.object_path(layout.payloads, d) for d in payloads],
        }
    )
    buf = io.BytesIO()
    pacsv.write_csv(t, buf)
    return buf.getvalue()


def build(
    r: Resolved,
    *,
    authors: tuple[str, ...] = (),
    url: str | None = None,
    layout: Layout = EXPORT,
    license: str | None = None,
) -> Croissant:
    """The document of revision ``r`` and the files it describes, where ``layout`` puts them
    (``Croissant``; by default as ``dsreg export`` writes them); ``authors`` its creators;
    ``url`` where its citation (``citeAs``) and ``url`` say it is fetched from; ``license``
    the licence of a revision whose snapshot records none (``source.license`` is never
    replaced)."""
    registry = r.registry
    ds = Dataset(r)
    table = _plain(ds.labels())
    view_bytes = _parquet_bytes(table)
    view_at = layout.view.replace("{sha256}", _sha256(view_bytes))
    files: dict[str, bytes] = {view_at: view_bytes}
    distribution = [
        _written(VIEW_FILE, view_bytes, view_at, media="application/x-parquet",
                 description=f"The {ds.view} view of revision {r.digest}, one row per example.")
    ]  # fmt: skip
    tables = [("examples", ds.snapshot.examples)] + [
        (f"corrections {i}", ov.corrections) for i, (_, ov) in enumerate(ds.overlays, 1)
    ]
    payloads = _payloads(table)
    sha256 = object_sha256(registry, [d for _, d in tables] + list(payloads))
    objects: dict[str, str] = {}
    for what, digest in tables:
        at = layout.object_path(layout.tables, digest)
        objects[at] = digest
        distribution.append(
            _file_object(
                EXPORT.object_path(TABLES_DIR, digest),
                f"{what} table",
                sha256=sha256[digest],
                size=registry.store.path(digest).stat().st_size,
                media="application/x-parquet",
                description=f"The dsreg {what} table, object {digest}.",
                url=at,
            )
        )
    record_sets = [classes_record_set(ds.classes), view_record_set(table, ds.view, len(ds.classes))]
    if payloads:
        csv = _payloads_csv(payloads, sha256, layout)
        csv_at = layout.payload_list.replace("{sha256}", _sha256(csv))
        files[csv_at] = csv
        objects.update({layout.object_path(layout.payloads, d): d for d in payloads})
        distribution += _payload_resources(csv, csv_at, layout)
        record_sets.append(payloads_record_set())
    c = cite(r, authors=authors, url=url)
    doc = _dataset(r, ds, c, license)
    doc["distribution"] = distribution
    doc["recordSet"] = record_sets
    return Croissant(document=doc, files=files, objects=objects, rows=table.num_rows)


def _payload_resources(csv: bytes, at: str, layout: Layout) -> list[dict[str, Any]]:
    listing = _written(
        PAYLOADS_FILE, csv, at, media="text/csv",
        description="Each payload's BLAKE3 digest, sha256, size and path.",
    )  # fmt: skip
    if not layout.file_set:
        return [listing]
    return [
        listing,
        {
            "@type": "cr:FileSet",
            "@id": "payload-files",
            "name": "payload files",
            "description": (
                f"The examples' payloads, each at {layout.payloads}/blake3/<first two hex "
                "digits>/<the rest> of its BLAKE3 digest; payloads.csv gives each one's sha256."
            ),
            "encodingFormat": "application/octet-stream",
            "includes": f"{layout.payloads}/blake3/*/*",
        },
    ]


def _dataset(r: Resolved, ds: Dataset, c: Citation, license: str | None) -> dict[str, Any]:
    reg = r.registry
    authors = c.authors
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
        # The revision digest is the version, as in the citation and DataCite record: what
        # fixes the data, where a number would have to be kept in step with it by hand.
        "version": r.digest,
        "sameAs": revision_iri(r.digest),
        "url": c.remote or revision_iri(r.digest),
        "creator": creators,
        "citeAs": c.bibtex(),
        "keywords": ["dsreg", r.dataset, ds.view],
    }
    chosen = c.license or license
    if chosen is not None:
        doc["license"] = license_url(chosen)
    if c.date is not None:
        doc["datePublished"] = c.date
    doc.update(derived_from(reg, r.revision))
    doc.update(annotation_fields(reg, r.revision))
    return doc

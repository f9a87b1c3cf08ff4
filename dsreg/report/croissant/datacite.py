"""DataCite JSON for a revision (``dsreg export --format datacite``), the metadata of a Zenodo
(or any DataCite) deposit of it.

The record is DataCite's REST API form (``{"data": {"type": "dois", "attributes": …}}``, metadata
schema 4.5) without a DOI, which the repository mints. The revision digest is its ``version`` and
an alternate identifier; its relations: ``IsNewVersionOf`` the revision it corrects (the same
view without its last overlay, or the original) and ``IsDerivedFrom`` the original revision,
both as ``urn:dsreg:blake3:<hex>``; ``References`` each DOI or URL of the dataset's and the
overlays' credit (``dsreg cite``'s BibTeX entries). The snapshot's licence (``source.license``) is
its ``rightsList``: an SPDX identifier with its scheme, or a licence's URL.
"""

from __future__ import annotations

from typing import Any

from dsreg.formats.credit import SPDX_LIST, BibEntry, is_url, license_url, plain
from dsreg.formats.manifests import Revision
from dsreg.registry.reader import Resolved
from dsreg.report.cite import Citation, cite
from dsreg.report.croissant.provenance import lineage, revision_iri

__all__ = ["datacite_metadata", "datacite_of"]


def _creators(c: Citation) -> list[dict[str, Any]]:
    if c.authors:
        return [
            {"name": a, "nameType": "Personal" if "," in a else "Organizational"} for a in c.authors
        ]
    return [{"name": f"{c.dataset} maintainers", "nameType": "Organizational"}]


def _references(entries: list[BibEntry]) -> list[dict[str, str]]:
    out = []
    for e in entries:
        doi, url = e.get("doi"), e.get("url")
        if doi:
            out.append({"relatedIdentifier": plain(doi), "relatedIdentifierType": "DOI"})
        elif url:
            out.append({"relatedIdentifier": plain(url), "relatedIdentifierType": "URL"})
        elif e.get("eprint") and (e.get("archiveprefix") or "").lower() == "arxiv":
            out.append(
                {
                    "relatedIdentifier": plain(e.get("eprint") or ""),
                    "relatedIdentifierType": "arXiv",
                }
            )
    return [{**r, "relationType": "References"} for r in out]


def datacite_metadata(
    r: Resolved, *, authors: tuple[str, ...] = (), url: str | None = None
) -> dict[str, Any]:
    """The DataCite record of ``spec``'s revision (module docstring); ``authors`` as
    ``dsreg cite --author``."""
    return datacite_of(cite(r, authors=authors, url=url), r.revision)


def datacite_of(c: Citation, rev: Revision) -> dict[str, Any]:
    """The DataCite record of the revision ``rev`` that ``c`` cites."""
    line = lineage(rev)
    related: list[dict[str, str]] = []
    if line.previous is not None:
        related.append(_urn(line.previous, "IsNewVersionOf"))
    if line.original is not None:
        related.append(_urn(line.original, "IsDerivedFrom"))
    related += _references(c.credit_entries())
    attributes: dict[str, Any] = {
        "types": {"resourceTypeGeneral": "Dataset", "resourceType": f"{c.view} view"},
        "titles": [{"title": f"{c.name}: the {c.view} view of {c.dataset}"}],
        "creators": _creators(c),
        "publisher": {"name": "dsreg"},
        "publicationYear": str(c.year),
        "version": c.revision,
        "alternateIdentifiers": [
            {"alternateIdentifier": c.revision, "alternateIdentifierType": "dsreg revision"},
            {"alternateIdentifier": c.snapshot, "alternateIdentifierType": "dsreg snapshot"},
        ],
        "descriptions": [{"description": c.text().strip(), "descriptionType": "Abstract"}],
        "subjects": [{"subject": "dsreg"}, {"subject": c.dataset}],
        "relatedIdentifiers": related,
        "schemaVersion": "http://datacite.org/schema/kernel-4",
    }
    if c.date is not None:
        attributes["dates"] = [{"date": c.date, "dateType": "Issued"}]
    if c.remote is not None and "://" in c.remote:
        attributes["url"] = c.remote
    if c.license is not None:
        attributes["rightsList"] = [_rights(c.license)]
    return {"data": {"type": "dois", "attributes": attributes}}


def _rights(license: str) -> dict[str, str]:
    """DataCite's ``rightsList`` entry of a licence: an SPDX identifier with its scheme and
    page, or a licence's URL."""
    if is_url(license):
        return {"rights": license, "rightsUri": license}
    return {
        "rights": license,
        "rightsUri": license_url(license),
        "rightsIdentifier": license,
        "rightsIdentifierScheme": "SPDX",
        "schemeUri": SPDX_LIST,
    }


def _urn(digest: str, relation: str) -> dict[str, str]:
    return {
        "relatedIdentifier": revision_iri(digest),
        "relatedIdentifierType": "URN",
        "relationType": relation,
    }

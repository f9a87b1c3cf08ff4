"""Croissant 1.1 JSON-LD and DataCite JSON for a revision: ``dsreg export --format croissant``
(the document and the files it describes, written to a folder) and ``--format datacite``.

``document`` builds the Croissant document, ``provenance`` what it and the DataCite record
say of the revision's origin (the sha256 of its objects, cached in the registry's state; the
revisions it derives from; the Responsible AI fields), ``datacite`` the DataCite record and
``write`` the export's folder."""

from dsreg.report.croissant.document import CONFORMS_TO, Croissant, build, croissant_metadata

__all__ = ["CONFORMS_TO", "Croissant", "build", "croissant_metadata"]

"""``dsreg cite``: BibTeX, CITATION.cff and plain text for a revision.

A citation carries the dataset name, the tag it was reached by, the full revision digest, the
snapshot and overlay digests and the dsreg version; ``dsreg show <digest>`` resolves each digest
in any registry that holds the revision. Nothing in it depends on time or user, so citing the same
revision twice gives the same text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dsreg._version import __version__
from dsreg.errors import InvalidInputError
from dsreg.objects.digest import short
from dsreg.repo.registry import Registry
from dsreg.views.sql import Connection

__all__ = ["FORMATS", "Citation", "check_format", "cite"]

FORMATS = ("bibtex", "cff", "text")


@dataclass(frozen=True, slots=True, kw_only=True)
class Citation:
    """What identifies a revision for a reader years later."""

    dataset: str
    tag: str | None
    view: str
    rows: int
    revision: str
    snapshot: str
    overlays: tuple[tuple[str, str], ...]  # (digest, kind)
    authors: tuple[str, ...] = ()
    dsreg_version: str = __version__
    format: str = "bibtex"  # what str() renders

    def __str__(self) -> str:
        return self.render()

    @property
    def name(self) -> str:
        return f"{self.dataset}@{self.tag or short(self.revision)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "tag": self.tag,
            "view": self.view,
            "rows": self.rows,
            "revision": self.revision,
            "snapshot": self.snapshot,
            "overlays": [{"digest": d, "kind": k} for d, k in self.overlays],
            "authors": list(self.authors),
            "dsreg_version": self.dsreg_version,
        }

    def digests(self) -> list[str]:
        """Every digest the citation carries: revision, snapshot, overlays."""
        return [self.revision, self.snapshot, *(d for d, _ in self.overlays)]

    def _overlays_text(self) -> str:
        if not self.overlays:
            return "no overlays"
        return "overlays " + ", ".join(f"{d} ({k})" for d, k in self.overlays)

    def text(self) -> str:
        return (
            f"{self.name}: the {self.view} view ({self.rows} rows) of dataset {self.dataset}. "
            f"dsreg revision {self.revision}; snapshot {self.snapshot}; "
            f"{self._overlays_text()}. Cited with dsreg {self.dsreg_version}; resolve any digest "
            f"with 'dsreg show <digest>'.\n"
        )

    def bibtex(self) -> str:
        key = re.sub(r"[^A-Za-z0-9_.:-]", "-", f"{self.name}-{short(self.revision)}")
        author = " and ".join("{" + _tex(a) + "}" for a in self.authors)
        fields = [
            ("title", f"{{{_tex(self.name)}}}: the {self.view} view of {_tex(self.dataset)}"),
            ("howpublished", f"dsreg revision {self.revision}"),
            ("version", self.revision),
            (
                "note",
                f"{self.rows} rows; snapshot {self.snapshot}; {self._overlays_text()}; "
                f"cited with dsreg {self.dsreg_version}; resolve with dsreg show <digest>",
            ),
        ]
        if author:
            fields.insert(0, ("author", author))
        body = ",\n".join(f"  {k:<12} = {{{v}}}" for k, v in fields)
        return f"@misc{{{key},\n{body},\n}}\n"

    def cff(self) -> str:
        authors = self.authors or (f"{self.dataset} maintainers",)
        q = json.dumps  # a JSON string is a valid YAML double-quoted scalar
        lines = [
            "cff-version: 1.2.0",
            "message: " + q("If you report results on this revision, cite it by its digest."),
            "type: dataset",
            "title: " + q(self.name),
            "version: " + q(self.revision),
            "abstract: "
            + q(
                f"The {self.view} view ({self.rows} rows) of dataset {self.dataset}: snapshot "
                f"{self.snapshot}, {self._overlays_text()}. Cited with dsreg {self.dsreg_version}."
            ),
            "authors:",
            *(f"  - name: {q(a)}" for a in authors),
            "identifiers:",
            "  - type: other",
            f"    value: {q(self.revision)}",
            f"    description: {q(f'dsreg revision ({self.view} view)')}",
            "  - type: other",
            f"    value: {q(self.snapshot)}",
            f"    description: {q('dsreg snapshot')}",
        ]
        for i, (d, k) in enumerate(self.overlays, 1):
            lines += [
                "  - type: other",
                f"    value: {q(d)}",
                f"    description: {q(f'dsreg overlay {i} ({k})')}",
            ]
        lines += ["keywords:", "  - " + q("dsreg"), "  - " + q(self.dataset)]
        return "\n".join(lines) + "\n"

    def render(self, format: str | None = None) -> str:
        """The citation as ``format`` (default: its own): ``bibtex``, ``cff`` or ``text``."""
        format = format or self.format
        if format == "bibtex":
            return self.bibtex()
        if format == "cff":
            return self.cff()
        if format == "text":
            return self.text()
        raise InvalidInputError(f"unknown citation format {format!r}; choose {', '.join(FORMATS)}")


def _tex(text: str) -> str:
    return re.sub(r"([_%&#$])", r"\\\1", text)


def check_format(format: str) -> None:
    if format not in FORMATS:
        raise InvalidInputError(f"unknown --format {format!r}; choose {', '.join(FORMATS)}")


def cite(
    reg: Registry, spec: str, *, authors: Sequence[str] = (), format: str = "bibtex"
) -> Citation:
    """The citation of ``spec``'s revision (its rows counted through its DuckDB view), to be
    rendered as ``format`` by ``str()``."""
    check_format(format)
    r = reg.resolve(spec)
    with Connection(reg) as con:
        con.create_view("__dsreg_cite", r.revision)
        rows = int(con.execute("SELECT count(*) FROM __dsreg_cite").fetchall()[0][0])
    return Citation(
        dataset=r.dataset,
        tag=r.tag,
        view=r.revision.view,
        rows=rows,
        revision=r.digest,
        snapshot=r.revision.snapshot,
        overlays=tuple((d, reg.overlay(d).kind) for d in r.revision.overlays),
        authors=tuple(authors),
        format=format,
    )

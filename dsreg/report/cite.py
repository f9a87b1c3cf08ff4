"""``dsreg cite``: BibTeX, CITATION.cff and plain text for a revision, that a reader resolves.

A citation carries the dataset name, the tag it was reached by, the full revision digest, the
snapshot and overlay digests, the year, the remote it can be fetched from and the one command
that fetches it on a fresh machine (``dsreg checkout <digest> DIR --remote URL``), the dsreg
version, the dataset creators' reference recorded at ``dsreg add`` (``source.credit``) and the
licence recorded there (``source.license``: CFF's ``license`` or ``license-url``, the text's
"License:"), and for each overlay applied its kind, the digests of the files it was made from
and the reference of its source recorded when it was made (``producer.credit``): a corrected
revision credits both the dataset and its corrections.

The year is the year of the first entry of the dataset's ref log that made a tag point at the
revision (a clone copies the log, so the year travels with it); a revision no tag ever named is
cited with the current year. Otherwise nothing depends on time or user: citing the same revision
with the same remote twice gives the same text.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dsreg._util.records import field_dict
from dsreg._version import __version__
from dsreg.errors import InvalidInputError
from dsreg.formats.credit import cff_reference, entry_text, format_bibtex, is_url, parse_bibtex
from dsreg.objects.digest import short
from dsreg.registry.folder import Registry
from dsreg.registry.reader import Reader, Resolved
from dsreg.report.show import LabelQuality, label_quality
from dsreg.views.sql import Connection

__all__ = [
    "FORMATS",
    "Citation",
    "OverlaySource",
    "check_format",
    "cite",
    "first_tagged",
    "overlay_source",
]

FORMATS = ("bibtex", "cff", "text")


@dataclass(frozen=True, slots=True, kw_only=True)
class OverlaySource:
    """Where an applied overlay's corrections came from: its kind, producer, the digests of
    the files it was made from (``producer.inputs``: a votes file, a relabeling, predicted
    probabilities) and the reference recorded with it (``producer.credit``)."""

    digest: str
    kind: str
    producer: str
    inputs: dict[str, str] = field(default_factory=dict)
    credit: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return field_dict(self, inputs=dict(self.inputs), credit=dict(self.credit))

    def describe(self) -> str:
        """``<digest> (<kind>, from <input> <digest>, …)``."""
        sources = ", ".join(f"{name} {d}" for name, d in sorted(self.inputs.items()))
        return f"{self.digest} ({self.kind}" + (f", from {sources})" if sources else ")")

    def entries(self) -> list[Any]:
        bib = self.credit.get("bibtex")
        return parse_bibtex(bib, what=f"overlay {short(self.digest)}'s credit") if bib else []


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
    year: int
    date: str | None = None  # YYYY-MM-DD of the first tag naming the revision; None: never tagged
    remote: str | None = None  # the URL the revision can be fetched from
    credit: dict[str, str] = field(default_factory=dict)  # the snapshot's source.credit
    license: str | None = None  # the snapshot's source.license: an SPDX id or a URL
    dsreg_version: str = __version__
    format: str = "bibtex"  # what str() renders
    label_quality: LabelQuality | None = None  # how clean the revision's labels are
    sources: tuple[OverlaySource, ...] = ()  # each applied overlay's source and credit

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
            "overlays": [self._overlay_dict(d, k) for d, k in self.overlays],
            "authors": list(self.authors),
            "year": self.year,
            "date": self.date,
            "remote": self.remote,
            "resolve": self.command,
            "credit": dict(self.credit),
            "dsreg_version": self.dsreg_version,
            "label_quality": None if self.label_quality is None else self.label_quality.to_dict(),
        } | ({"license": self.license} if self.license is not None else {})

    def _overlay_dict(self, digest: str, kind: str) -> dict[str, Any]:
        src = next((o for o in self.sources if o.digest == digest), None)
        return src.to_dict() if src is not None else {"digest": digest, "kind": kind}

    @property
    def command(self) -> str | None:
        """The command that fetches the revision on a fresh machine (``None``: no remote)."""
        if self.remote is None:
            return None
        return (
            f"dsreg checkout {self.revision} {shlex.quote(self.dataset)} "
            f"--remote {shlex.quote(self.remote)}"
        )

    def _resolve_text(self) -> str:
        if self.command is None:
            return "resolve any digest with 'dsreg show <digest>' in a registry that holds it"
        return f"get it with: {self.command}"

    def _credit_entries(self) -> list[Any]:
        bib = self.credit.get("bibtex")
        return parse_bibtex(bib, what="the snapshot's credit") if bib else []

    def _overlay_entries(self) -> list[Any]:
        """The applied overlays' BibTeX entries, in overlay order, each key once (and none
        the dataset's credit has already)."""
        seen = {e.key for e in self._credit_entries()}
        out = []
        for src in self.sources:
            for e in src.entries():
                if e.key not in seen:
                    seen.add(e.key)
                    out.append(e)
        return out

    def credit_entries(self) -> list[Any]:
        """Every BibTeX entry the citation credits: the dataset's, then its overlays'."""
        return self._credit_entries() + self._overlay_entries()

    def _credit_text(self) -> str:
        parts = [entry_text(e) for e in self._credit_entries()]
        if self.credit.get("text"):
            parts.append(self.credit["text"])
        return " ".join(parts)

    def _corrections_text(self) -> str:
        """The applied overlays' credit as plain text (their entries, then their texts)."""
        parts = [entry_text(e) for e in self._overlay_entries()]
        parts += [o.credit["text"] for o in self.sources if o.credit.get("text")]
        return " ".join(parts)

    def digests(self) -> list[str]:
        """Every digest the citation carries: revision, snapshot, overlays."""
        return [self.revision, self.snapshot, *(d for d, _ in self.overlays)]

    def _overlays_text(self) -> str:
        if not self.overlays:
            return "no overlays"
        described = {o.digest: o.describe() for o in self.sources}
        return "overlays " + ", ".join(described.get(d, f"{d} ({k})") for d, k in self.overlays)

    def text(self) -> str:
        by = ", ".join(self.authors) + ". " if self.authors else ""
        credit = self._credit_text()
        data = f" Dataset: {credit}" if credit else ""
        fixes = self._corrections_text()
        data += f" Corrections: {fixes}" if fixes else ""
        where = f" Remote: {self.remote}." if self.remote else ""
        where += f" License: {self.license}." if self.license else ""
        return (
            f"{by}{self.name} ({self.year}): the {self.view} view ({self.rows} rows) of dataset "
            f"{self.dataset}. dsreg revision {self.revision}; snapshot {self.snapshot}; "
            f"{self._overlays_text()}.{data}{where} Cited with dsreg {self.dsreg_version}; "
            f"{self._resolve_text()}\n"
        )

    def bibtex(self) -> str:
        key = re.sub(r"[^A-Za-z0-9_.:-]", "-", f"{self.name}-{short(self.revision)}")
        author = " and ".join("{" + _tex(a) + "}" for a in self.authors)
        entries = self._credit_entries()
        note = f"{self.rows} rows; snapshot {self.snapshot}; {self._overlays_text()}"
        if entries:
            note += "; dataset: please also cite " + ", ".join(e.key for e in entries)
        if self.credit.get("text"):
            note += f"; dataset: {_tex(self.credit['text'])}"
        fixes = self._overlay_entries()
        if fixes:
            note += "; corrections: please also cite " + ", ".join(e.key for e in fixes)
        for o in self.sources:
            if o.credit.get("text"):
                note += f"; corrections {short(o.digest)}: {_tex(o.credit['text'])}"
        note += f"; cited with dsreg {self.dsreg_version}; {_tex(self._resolve_text())}"
        fields = [
            ("title", f"{{{_tex(self.name)}}}: the {self.view} view of {_tex(self.dataset)}"),
            ("year", str(self.year)),
            ("howpublished", f"dsreg revision {self.revision}"),
            ("version", self.revision),
        ]
        if author:
            fields.insert(0, ("author", author))
        if self.remote is not None:
            fields.append(("url", self.remote))
        fields.append(("note", note))
        body = ",\n".join(f"  {k:<12} = {{{v}}}" for k, v in fields)
        text = f"@misc{{{key},\n{body},\n}}\n"
        if entries:
            text += "\n" + self.credit["bibtex"]
        if fixes:
            text += "\n" + format_bibtex(fixes)
        return text

    def cff(self) -> str:
        authors = self.authors or (f"{self.dataset} maintainers",)
        q = json.dumps  # a JSON string is a valid YAML double-quoted scalar
        message = "If you report results on this revision, cite it by its digest"
        entries = self._credit_entries() + self._overlay_entries()
        if self._credit_entries():
            message += " and the dataset's creators (references)"
        if self._overlay_entries():
            message += " and the sources of its corrections (references)"
        if self.credit.get("text"):
            message += f" (dataset: {self.credit['text']})"
        message += f"; {self._resolve_text()}"
        lines = [
            "cff-version: 1.2.0",
            "message: " + q(message),
            "type: dataset",
            "title: " + q(self.name),
            "version: " + q(self.revision),
        ]
        if self.date is not None:
            lines.append("date-released: " + q(self.date))
        if self.remote is not None and "://" in self.remote:
            lines.append("repository: " + q(self.remote))
        if self.license is not None:
            key = "license-url" if is_url(self.license) else "license"
            lines.append(f"{key}: " + q(self.license))
        lines += [
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
        described = {o.digest: o for o in self.sources}
        for i, (d, k) in enumerate(self.overlays, 1):
            src = described.get(d)
            what = src.describe()[len(d) + 1 :] if src is not None else f"({k})"
            lines += [
                "  - type: other",
                f"    value: {q(d)}",
                f"    description: {q(f'dsreg overlay {i} {what}')}",
            ]
        lines += ["keywords:", "  - " + q("dsreg"), "  - " + q(self.dataset)]
        if entries:
            lines.append("references:")
            for e in entries:
                lines += _yaml_item(cff_reference(e), indent="  ")
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


def _yaml_item(d: dict[str, Any], *, indent: str) -> list[str]:
    """A mapping as a YAML list item; values are strings, numbers or lists of mappings."""
    lines = []
    for i, (k, v) in enumerate(d.items()):
        lead = indent + ("- " if i == 0 else "  ")
        if isinstance(v, list):
            lines.append(f"{lead}{k}:")
            for item in v:
                lines += _yaml_item(item, indent=indent + "    ")
        else:
            lines.append(f"{lead}{k}: {json.dumps(v)}")
    return lines


def _tex(text: str) -> str:
    return re.sub(r"([_%&#$])", r"\\\1", text)


def check_format(format: str) -> None:
    if format not in FORMATS:
        raise InvalidInputError(f"unknown --format {format!r}; choose {', '.join(FORMATS)}")


def overlay_source(reg: Registry, digest: str) -> OverlaySource:
    """What a citation says of overlay ``digest``: its kind, producer, input files and credit."""
    ov = reg.overlay(digest)
    p = ov.producer
    return OverlaySource(
        digest=digest,
        kind=ov.kind,
        producer=str(p.get("name", "")),
        inputs=dict(p.get("inputs") or {}),
        credit=dict(p.get("credit") or {}),
    )


def first_tagged(reader: Reader, dataset: str, revision: str) -> str | None:
    """The time (``YYYY-MM-DDTHH:MM:SSZ``) of the first log entry that pointed a tag of
    ``dataset`` at ``revision``, or ``None``: the log travels with the dataset, so a registry
    and its remotes agree on it."""
    return next((e.time for e in reader.log(dataset) if e.new == revision), None)


def cite(
    r: Resolved,
    *,
    authors: Sequence[str] = (),
    format: str = "bibtex",
    url: str | None = None,
) -> Citation:
    """The citation of revision ``r`` (its rows counted through its DuckDB view), to be
    rendered as ``format`` by ``str()``. ``url``: where readers fetch it (not contacted)."""
    check_format(format)
    reg = r.registry
    when = first_tagged(r.reader, r.dataset, r.digest)
    snap = reg.snapshot(r.revision.snapshot)
    with Connection(r.reader) as con:
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
        sources=tuple(overlay_source(reg, d) for d in r.revision.overlays),
        authors=tuple(authors),
        year=int(when[:4]) if when else time.gmtime().tm_year,
        date=when[:10] if when else None,
        remote=url,
        credit=dict(snap.source.get("credit") or {}),
        license=snap.source.get("license"),
        format=format,
        label_quality=label_quality(r),
    )

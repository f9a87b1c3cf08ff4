"""What a revision's Croissant and DataCite documents say beyond its rows: the sha256 of its
objects (cached in the registry's state), the revisions it derives from, the activities that
made its overlays, and the Responsible AI fields dsreg knows (how its labels were annotated).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dsreg.formats.manifests import Overlay, Revision, Snapshot
from dsreg.objects.digest import hex_of
from dsreg.registry.folder import Registry
from dsreg.registry.tables import read_corrections

__all__ = [
    "Lineage",
    "annotation_fields",
    "derived_from",
    "lineage",
    "object_sha256",
    "revision_iri",
]

# Objects up to this size are read whole (one read, both digests over the same bytes); larger
# ones (an examples table of millions of rows) are re-hashed in place, then streamed.
_WHOLE = 64 << 20
_CHUNK = 1 << 20


def object_sha256(reg: Registry, digests: Iterable[str]) -> dict[str, str]:
    """The sha256 (hex) of each object ``digests`` names, by digest: from the registry's state
    when recorded, else computed from the object's bytes, whose BLAKE3 digest is checked first
    (a damaged object is refused, never described), and recorded for the next time."""
    wanted = list(dict.fromkeys(digests))
    known = reg.state.sha256s([hex_of(d) for d in wanted])
    out: dict[str, str] = {}
    new: list[tuple[str, str]] = []
    for d in wanted:
        h = hex_of(d)
        if h in known:
            out[d] = known[h]
            continue
        out[d] = _hash_object(reg, d)
        new.append((h, out[d]))
    if new:
        # The state only saves work: a read-only registry computes them again next time.
        with contextlib.suppress(OSError):
            reg.state.put_sha256s(new)
    return out


def _hash_object(reg: Registry, digest: str) -> str:
    path = reg.store.path(digest)
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    if size <= _WHOLE:
        return hashlib.sha256(reg.store.read_bytes(digest)).hexdigest()
    sha = hashlib.sha256()
    with open(reg.store.verified_path(digest), "rb") as f:
        while chunk := f.read(_CHUNK):
            sha.update(chunk)
    return sha.hexdigest()


def revision_iri(digest: str) -> str:
    """A dsreg digest as an IRI (``urn:dsreg:blake3:<hex>``): what a revision, snapshot or
    overlay is named by in JSON-LD and DataCite relations."""
    return f"urn:dsreg:{digest}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Lineage:
    """The revisions a revision derives from: ``original`` (its snapshot, no overlay, the
    original view) and ``previous`` (the same view with its last overlay left out), both
    ``None`` for a revision that is its snapshot's original."""

    original: str | None
    previous: str | None


def lineage(rev: Revision) -> Lineage:
    original = Revision(snapshot=rev.snapshot).digest
    if not rev.overlays and rev.view == "original":
        return Lineage(original=None, previous=None)
    if not rev.overlays:
        return Lineage(original=original, previous=original)
    previous = Revision(snapshot=rev.snapshot, overlays=rev.overlays[:-1], view=rev.view)
    return Lineage(
        original=original,
        previous=original if not rev.overlays[:-1] else previous.digest,
    )


def derived_from(reg: Registry, rev: Revision) -> dict[str, Any]:
    """The PROV-O and schema.org properties of a revision's provenance: ``prov:wasDerivedFrom``
    and ``isBasedOn`` the original revision (a corrected revision is derived from it), and one
    ``prov:Activity`` per overlay naming its producer and the files it used."""
    line = lineage(rev)
    out: dict[str, Any] = {}
    if line.original is not None:
        out["prov:wasDerivedFrom"] = {"@id": revision_iri(line.original)}
        out["isBasedOn"] = revision_iri(line.original)
    activities = []
    for d in rev.overlays:
        ov = reg.overlay(d)
        p = ov.producer
        activity: dict[str, Any] = {
            "@type": "prov:Activity",
            "@id": revision_iri(d),
            "prov:label": f"{p.get('name', 'dsreg')} {p.get('version', '')}".strip()
            + f": a {ov.kind} overlay",
        }
        used = [{"@id": revision_iri(v)} for _, v in sorted((p.get("inputs") or {}).items())]
        if used:
            activity["prov:used"] = used
        activities.append(activity)
    if activities:
        out["prov:wasGeneratedBy"] = activities
    return out


def _rater_counts(reg: Registry, ov: Overlay, base: Snapshot) -> tuple[int, int] | None:
    """The fewest and most annotations per item of an overlay with rater counts (per class)
    or votes, read from its corrections table; ``None`` when it has neither."""
    table = read_corrections(reg, ov, base=base)
    sums: list[int] = []
    if "label_counts" in table.column_names:
        # A row's counts: (label, count) pairs, one per class some rater chose.
        sums = [sum(e["count"] for e in c) for c in table.column("label_counts").to_pylist() if c]
    if not sums and "votes" in table.column_names:
        sums = [
            sum(v for v in votes.values() if v is not None)
            for votes in table.column("votes").to_pylist()
            if votes is not None and any(v is not None for v in votes.values())
        ]
    return (min(sums), max(sums)) if sums else None


def _protocol(ov: Overlay, per_item: tuple[int, int] | None) -> str:
    p = ov.producer
    params = p.get("params") or {}
    name = p.get("name", "")
    fmt = params.get("format")
    raters = ""
    if per_item is not None:
        lo, hi = per_item
        raters = f"; {lo} annotations per item" if lo == hi else f"; {lo} to {hi} per item"
    if name == "dsreg.import-votes":
        return (
            f"Human validation votes ({fmt} file): each flagged item's given and suggested "
            f"labels put to raters; verdicts at agreement threshold {params.get('threshold')} "
            f"(the categories of Northcutt et al. 2021){raters}."
        )
    if name == "dsreg.import-labels" and fmt == "real":
        return f"Published relabeling: a set of plausible labels per item (ImageNet-ReaL){raters}."
    if name == "dsreg.import-labels" and fmt == "counts":
        return (
            "Published relabeling: rater counts per class per item (as CIFAR-10H); the "
            f"majority at share {params.get('threshold')} decides{raters}."
        )
    if name == "dsreg.import-labels":
        return "Corrections made by hand (a corrections CSV)."
    if name == "dsreg.detect":
        return (
            "Machine-flagged label issues: confident learning on out-of-sample predicted "
            f"probabilities (filter_by {params.get('filter_by')}, rank_by "
            f"{params.get('rank_by')})."
        )
    return f"Label corrections made by {name or 'an unknown producer'}{raters}."


def annotation_fields(reg: Registry, rev: Revision) -> dict[str, Any]:
    """The ``rai:`` fields of a revision's labels: the protocol of each overlay applied
    (``rai:dataAnnotationProtocol``), the annotations per item its votes or rater counts
    hold (``rai:annotationsPerItem``), the machine tools that flagged rows
    (``rai:machineAnnotationTools``) and each overlay's verdict counts
    (``rai:dataAnnotationAnalysis``). Empty for a revision without overlays."""
    protocols: list[str] = []
    per_item: list[str] = []
    tools: list[str] = []
    analysis: list[str] = []
    snap = reg.snapshot(rev.snapshot)
    for d in rev.overlays:
        ov = reg.overlay(d)
        counts = _rater_counts(reg, ov, snap) if ov.kind == "validated" else None
        protocols.append(_protocol(ov, counts))
        if counts is not None:
            lo, hi = counts
            span = str(lo) if lo == hi else f"{lo} to {hi}"
            per_item.append(f"{span} (overlay {d})")
        if ov.kind == "detected":
            tools.append(f"dsreg {ov.producer.get('version', '')} confident learning".strip())
        figures = ", ".join(
            f"{k} {v}" for k, v in ov.summary.items() if isinstance(v, int) and k != "rows"
        )
        analysis.append(f"overlay {d} ({ov.kind}): {ov.summary.get('rows', 0)} rows; {figures}")
    out: dict[str, Any] = {}
    if protocols:
        out["rai:dataAnnotationProtocol"] = protocols
        out["rai:dataAnnotationAnalysis"] = analysis
    if per_item:
        out["rai:annotationsPerItem"] = "; ".join(per_item)
    if tools:
        out["rai:machineAnnotationTools"] = tools
    return out

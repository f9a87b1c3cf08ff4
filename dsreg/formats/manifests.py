"""Snapshot, overlay and revision manifests: immutable records, canonical JSON, schema-checked.

Manifests hold content, never time or user: two people adding the same bytes get the same digest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, get_args

from dsreg._util.records import field_dict, from_fields
from dsreg.errors import ManifestError
from dsreg.formats.canonical import canonical_bytes, parse_json
from dsreg.formats.schemas import validate
from dsreg.objects.digest import short
from dsreg.objects.hashing import hash_bytes

__all__ = [
    "AUDIT_VERDICTS",
    "ERRORS",
    "HELD_INPUT",
    "KINDS",
    "SUMMARIZED_VERDICTS",
    "TAG_VIEWS",
    "VERDICTS",
    "VIEWS",
    "Manifest",
    "Overlay",
    "OverlayKind",
    "Revision",
    "Snapshot",
    "View",
    "canonical_manifest",
    "decode_manifest",
    "encode_manifest",
]

View: TypeAlias = Literal[
    "original", "cleaned", "corrected", "honeypot", "multilabel", "decontaminated"
]
OverlayKind: TypeAlias = Literal["detected", "validated", "manual", "audit"]
VIEWS: tuple[View, ...] = get_args(View)
# The view a tag made with a new overlay serves unless ``--view`` names one, by the overlay's
# producer: a correction's tag serves the cleaned labels; an audit's, and a review of its
# findings, the rows it did not name.
TAG_VIEWS: Mapping[str, View] = {
    "dsreg.detect": "cleaned",
    "dsreg.import-votes": "cleaned",
    "dsreg.import-labels": "cleaned",
    "dsreg.audit-duplicates": "decontaminated",
    "dsreg.review-pairs": "decontaminated",
}
KINDS: tuple[OverlayKind, ...] = get_args(OverlayKind)
# The verdicts of Northcutt et al. (NeurIPS 2021), plus ``suspected`` (detected, not validated)
# and ``unreviewed`` (a review finished before the row had its votes: not judged, so no error).
# Then the audit's two (``dsreg audit duplicates``): a row that repeats another row of its own
# set, or that matches a row of another dataset. They say nothing of the label.
AUDIT_VERDICTS = ("duplicate", "contaminated")
VERDICTS = (
    "suspected",
    "non_error",
    "correctable",
    "multi_label",
    "neither",
    "non_agreement",
    "unreviewed",
    *AUDIT_VERDICTS,
)
# An overlay's summary counts these verdicts always (0 when no row has one, among those its
# kind may hold) and ``unreviewed`` only when a row has it, so the overlays made before that
# verdict keep their bytes and digests.
SUMMARIZED_VERDICTS = tuple(v for v in VERDICTS if v != "unreviewed")
# Every label verdict but non_error and unreviewed is an error: the cleaned view removes such
# rows. The audit's verdicts are not label errors; the decontaminated view removes those rows.
ERRORS = frozenset(
    v for v in VERDICTS if v not in ("non_error", "unreviewed") and v not in AUDIT_VERDICTS
)

SNAPSHOT = "dsreg/snapshot/1"
OVERLAY = "dsreg/overlay/1"
# Version 2: the corrections table has the ``labels`` and ``label_counts`` columns
# (formats/corrections.py). Only such overlays are written as version 2, so every overlay made
# before keeps its bytes and digest, and a dsreg that predates the columns refuses a version 2
# overlay instead of ignoring what its raters said.
OVERLAY_2 = "dsreg/overlay/2"
# Version 3: an audit's corrections table, with the ``matches`` column (formats/corrections.py).
# Its producer inputs named ``fingerprints`` or ``<name>_fingerprints`` are objects the overlay
# holds (``Overlay.held``): the fingerprints tables the audit read.
OVERLAY_3 = "dsreg/overlay/3"
# Version 4: version 2's columns and ``category`` (formats/corrections.py), the category a
# published re-annotation gave each row (MMLU-Redux's error type, a status), as dsreg spells it.
OVERLAY_4 = "dsreg/overlay/4"
HELD_INPUT = "fingerprints"
REVISION = "dsreg/revision/1"


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """The immutable base content of a dataset: an examples table plus its classes.

    ``task``: ``multiclass``, or a question set's (``questions.answers.TASKS``: the classes of a
    ``multiple-choice`` set are answer letters, those of an ``exact-answer`` set its answers).
    ``normalization``: an exact-answer set's rule for comparing answers (``gsm8k/1``), part of
    its digest; ``None`` for every other set, and then no key at all, so a snapshot made
    without one keeps its bytes and digest."""

    dataset: str
    examples: str
    rows: int
    classes: tuple[str, ...]
    task: str = "multiclass"
    source: dict[str, Any] = field(default_factory=dict)
    normalization: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {"schema": SNAPSHOT, **field_dict(self, classes=list(self.classes))}
        if self.normalization is None:
            del d["normalization"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Snapshot:
        return from_fields(
            cls, d, classes=tuple(d["classes"]), normalization=d.get("normalization")
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Overlay:
    """An immutable set of label corrections for exactly one snapshot (``base``)."""

    base: str
    kind: OverlayKind
    corrections: str
    producer: dict[str, Any]
    summary: dict[str, Any]
    version: int = 1  # 2: labels and label_counts; 3: an audit's matches; 4: 2 and category

    def to_dict(self) -> dict[str, Any]:
        # The schema says the version: it has no key of its own.
        schema = {2: OVERLAY_2, 3: OVERLAY_3, 4: OVERLAY_4}.get(self.version, OVERLAY)
        d: dict[str, Any] = {"schema": schema, **field_dict(self)}
        del d["version"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Overlay:
        version = {OVERLAY_2: 2, OVERLAY_3: 3, OVERLAY_4: 4}.get(d.get("schema", ""), 1)
        return from_fields(cls, d, version=version)

    @property
    def held(self) -> tuple[str, ...]:
        """The objects this overlay holds besides its corrections table, which whatever keeps
        the overlay keeps too (gc, verify, push, pull): of a version 3 (audit) overlay, the
        fingerprints tables its producer inputs name (``fingerprints``, the audited set's, and
        ``against<k>_fingerprints``); of the other versions, none."""
        if self.version != 3:
            return ()
        inputs = self.producer.get("inputs", {})
        return tuple(
            d
            for name, d in sorted(inputs.items())
            if name == HELD_INPUT or name.endswith(f"_{HELD_INPUT}")
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Revision:
    """What a paper cites: a snapshot, overlays applied in order, and a view rule."""

    snapshot: str
    overlays: tuple[str, ...] = ()
    view: View = "original"

    def to_dict(self) -> dict[str, Any]:
        return {"schema": REVISION, **field_dict(self, overlays=list(self.overlays))}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Revision:
        return from_fields(cls, d, overlays=tuple(d["overlays"]))

    @property
    def digest(self) -> str:
        """The revision's digest, whether or not it is stored yet."""
        return hash_bytes(encode_manifest(self))


Manifest: TypeAlias = Snapshot | Overlay | Revision
_BY_SCHEMA: dict[str, tuple[str, type[Snapshot] | type[Overlay] | type[Revision]]] = {
    SNAPSHOT: ("snapshot", Snapshot),
    OVERLAY: ("overlay", Overlay),
    OVERLAY_2: ("overlay", Overlay),
    OVERLAY_3: ("overlay", Overlay),
    OVERLAY_4: ("overlay", Overlay),
    REVISION: ("revision", Revision),
}


def _schema_name(m: Manifest) -> str:
    return {Snapshot: "snapshot", Overlay: "overlay", Revision: "revision"}[type(m)]


def encode_manifest(m: Manifest) -> bytes:
    """Validate ``m`` and return its canonical bytes (what is stored and hashed)."""
    validate(m.to_dict(), _schema_name(m), what=f"{_schema_name(m)} manifest")
    return canonical_manifest(m)


def canonical_manifest(m: Manifest) -> bytes:
    """``m``'s canonical bytes, with every check of ``encode_manifest`` but the schema's: for a
    caller that knows these bytes passed it (``dsreg.registry.schemamemo``)."""
    d = m.to_dict()
    if isinstance(m, Revision) and len(set(m.overlays)) != len(m.overlays):
        raise ManifestError("a revision names the same overlay twice; name each overlay once")
    return canonical_bytes(d)


def decode_manifest(data: bytes, *, digest: str, schema_checked: bool = False) -> Manifest:
    """Parse and validate stored manifest bytes (already verified against ``digest``).

    ``schema_checked``: these very bytes passed the schema check before (the registry's memo,
    ``dsreg.registry.schemamemo``), so it is not run again; every other check still is."""
    what = f"object {short(digest)}"
    hint = "; dsreg writes no such manifest: a damaged or foreign object ('dsreg verify' lists it)"
    d = parse_json(data, what=what, hint=hint)
    # A str check first: a hostile "schema" of a list or object is not even hashable.
    if (
        not isinstance(d, dict)
        or not isinstance(d.get("schema"), str)
        or (d["schema"] not in _BY_SCHEMA)
    ):
        raise ManifestError(f"{what} is not a dsreg manifest (no known 'schema' field)")
    name, cls = _BY_SCHEMA[d["schema"]]
    if not schema_checked:
        validate(d, name, what=f"{name} manifest {short(digest)}")
    return cls.from_dict(d)

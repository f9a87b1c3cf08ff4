"""Recorded results: a model's predictions on a snapshot, kept in the registry.

A result is two objects. The *predictions* are a ``.npy`` array aligned with the snapshot's rows
(row i predicts row i): ``n`` class indices (int32) or ``(n, k)`` probabilities (float32 or
float64), written with a fixed header so that the same predictions are the same bytes. The
*record* is canonical JSON naming the dataset, the model, the snapshot's digest (the rows the
predictions are aligned with), the predictions' digest, their kind and shape, and the user's
``meta``. A model ref, ``results/<dataset>/<model>``, holds the record's digest.

The ref store writes a model ref as it writes a tag: under the dataset's lock, with a line in
``logs/<dataset>.jsonl`` (event ``result``, the model in ``tag``) made durable first, so
``dsreg log`` lists it among the tags' moves. A recorded result is immutable: recording the same
record again is a no-op, and pointing the name at another record needs ``force`` and is logged as
a move, its old value kept (and kept from gc) as a moved tag's is.
"""

from __future__ import annotations

import functools
import io
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from dsreg._util.lazy import lazy_imports
from dsreg._util.records import from_fields
from dsreg.errors import (
    DsregError,
    IntegrityError,
    ManifestError,
    NotFoundError,
    PredictionsError,
    TagExistsError,
)
from dsreg.formats.canonical import canonical_bytes, parse_json
from dsreg.formats.names import check_name
from dsreg.objects.digest import is_digest, short
from dsreg.objects.hashing import hash_bytes
from dsreg.registry.folder import Registry
from dsreg.registry.reachable import Problem
from dsreg.registry.refs import RefStore

# A push or pull of results without predictions to check, and a no-op push, need no numpy.
with lazy_imports():
    import numpy as np

    from dsreg.formats import inputfiles

__all__ = [
    "EVENT",
    "Prepared",
    "Recorded",
    "ResultRecord",
    "check_meta",
    "check_values",
    "checked_record",
    "list_results",
    "load_predictions",
    "prepare",
    "read_result",
    "record_again",
    "record_result",
    "recorded_digests",
    "refuse_conflict",
    "resolve_result",
    "result_objects",
    "result_problems",
    "result_refs",
]

#: The value of a record's ``result`` key (its format) and the log event of a model ref.
FORMAT: Final = "dsreg/result/1"
EVENT: Final = "result"
KINDS: Final = ("labels", "topk", "probabilities")
_DTYPES: Final = {"labels": ("<i4",), "topk": ("<i4",), "probabilities": ("<f4", "<f8")}
# Predictions up to this size are read whole, not memory-mapped (a mapping costs more).
_READ_WHOLE: Final = 16 << 20
# What a model ref is called in errors, and the command that records it again (which repairs
# a damaged ref, record or predictions: ``record_result`` with ``force``).
_MODEL_REF = "model ref {dataset}/{tag}"
_RECORD_AGAIN = (
    "record the model again with 'dsreg eval {dataset}@REVISION PREDICTIONS --record --model "
    "{tag} --force' (its results are listed by 'dsreg log {dataset}')"
)
# A ``meta`` key or value is at most this long, and there are at most this many keys.
_META_TEXT: Final = 256
_META_KEYS: Final = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultRecord:
    """One recorded result (the record): whose predictions, on which snapshot's rows.

    ``predictions`` is the stored copy, in the form a result stores (``aligned_predictions``);
    ``source`` the BLAKE3 of the predictions as given (a file's bytes, an array's ``.npy``
    bytes) where they differ from it, the digest ``dsreg eval`` printed and ``cite --model``
    cites. A record without ``source`` was given its stored bytes (or was made before dsreg
    kept it) and keeps the digest it has."""

    dataset: str
    model: str
    snapshot: str
    predictions: str
    kind: str
    rows: int
    classes: int
    dtype: str
    meta: dict[str, str] = field(default_factory=dict)
    source: str | None = None

    @property
    def given(self) -> str:
        """The digest of the predictions as given: ``source``, else the stored copy's."""
        return self.source or self.predictions

    def to_dict(self) -> dict[str, Any]:
        # Sorted, "dataset" is the first key: no manifest starts so (Registry.is_manifest).
        out: dict[str, Any] = {
            "dataset": self.dataset,
            "dtype": self.dtype,
            "kind": self.kind,
            "meta": dict(self.meta),
            "model": self.model,
            "predictions": self.predictions,
            "result": FORMAT,
            "rows": self.rows,
            "classes": self.classes,
            "snapshot": self.snapshot,
        }
        if self.source is not None:
            out["source"] = self.source
        return out

    def encode(self) -> bytes:
        return canonical_bytes(self.to_dict())

    @classmethod
    def decode(cls, data: bytes, *, digest: str) -> ResultRecord:
        """The record in ``data``; ``ManifestError`` naming the object if it holds none."""
        what = f"result record {short(digest)}"
        d = parse_json(data, what=what)
        problem = _record_problem(d)
        if problem is not None:
            raise ManifestError(
                f"{what} is damaged ({problem}); record the model again with --force, or "
                "pull the result from a remote"
            )
        return from_fields(cls, d, meta=dict(d["meta"]), source=d.get("source"))


def _record_problem(d: Any) -> str | None:
    if not isinstance(d, dict) or d.get("result") != FORMAT:
        return "not a result record"
    for key in ("dataset", "model", "snapshot", "predictions", "kind", "dtype"):
        if not isinstance(d.get(key), str):
            return f"no {key!r}"
    for key in ("rows", "classes"):
        if not isinstance(d.get(key), int) or isinstance(d[key], bool) or d[key] < 0:
            return f"{key!r} is not a count"
    if not (is_digest(d["snapshot"]) and is_digest(d["predictions"])):
        return "a digest does not parse"
    if "source" in d and not (isinstance(d["source"], str) and is_digest(d["source"])):
        return "'source' is not a digest"
    if d["kind"] not in KINDS or d["dtype"] not in _DTYPES[d["kind"]]:
        return f"kind {d['kind']!r} of dtype {d['dtype']!r} is not one dsreg writes"
    meta = d.get("meta")
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        return "'meta' is not an object of strings"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Recorded:
    """What recording did: ``status`` is ``recorded`` (a new model), ``unchanged`` (the same
    record was there, intact: nothing written), ``repaired`` (``--force``: the same record was
    there, damaged, and its objects were stored again) or ``moved`` (``--force``: ``old`` is the
    record before)."""

    dataset: str
    model: str
    digest: str
    predictions: str
    source: str
    status: str
    old: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "model": self.model,
            "result": self.digest,
            "predictions": self.predictions,
            "source": self.source,
            "status": self.status,
            "old": self.old,
        }


def result_refs(reg: Registry) -> RefStore:
    """The model refs of ``reg`` (``results/<dataset>/<model>``), logged in the dataset logs."""
    return RefStore(reg.root, refs="results", name=_MODEL_REF, repair=_RECORD_AGAIN)


def record_again(dataset: str, model: str) -> str:
    """The advice that repairs a recorded model: the command that records it again."""
    return _RECORD_AGAIN.format(dataset=dataset, tag=model)


def check_meta(meta: Mapping[str, str]) -> dict[str, str]:
    """``meta`` as a dict of short strings; ``PredictionsError`` naming the first bad entry."""
    out: dict[str, str] = {}
    if len(meta) > _META_KEYS:
        raise PredictionsError(f"{len(meta)} --meta entries; give at most {_META_KEYS}")
    for k, v in meta.items():
        if not isinstance(k, str) or not k or not isinstance(v, str):
            raise PredictionsError(f"--meta {k!r}={v!r}: give KEY=VALUE with a non-empty key")
        if len(k) > _META_TEXT or len(v) > _META_TEXT:
            raise PredictionsError(
                f"--meta {k[:40]!r}: keys and values are at most {_META_TEXT} characters"
            )
        out[k] = v
    return out


def encode_predictions(arr: np.ndarray) -> bytes:
    """The ``.npy`` bytes of an aligned array (format 1.0, C order): the same array, the same
    bytes."""
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=(1, 0), allow_pickle=False)
    return buf.getvalue()


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """A record and its predictions' bytes, made but not stored (``prepare``)."""

    record: ResultRecord
    data: bytes

    @property
    def digest(self) -> str:
        return hash_bytes(self.record.encode())


def _kind(predictions: np.ndarray, classes: int) -> str:
    """The kind of aligned predictions: 1-D labels, narrower integer top-k, or probabilities."""
    if predictions.ndim == 1:
        return "labels"
    return (
        "topk"
        if predictions.dtype.kind == "i" and predictions.shape[1] < classes
        else ("probabilities")
    )


def prepare(
    *,
    dataset: str,
    model: str,
    snapshot: str,
    predictions: np.ndarray,
    classes: int,
    meta: Mapping[str, str] | None = None,
    source: str | None = None,
) -> Prepared:
    """The record of aligned ``predictions`` (from ``aligned_predictions``) of ``model``;
    ``source``: the digest of the predictions as given, kept where it is not the stored
    copy's."""
    check_name(model, what="model name")
    data = encode_predictions(predictions)
    stored = hash_bytes(data)
    rec = ResultRecord(
        dataset=dataset,
        model=model,
        snapshot=snapshot,
        predictions=stored,
        kind=_kind(predictions, classes),
        rows=int(predictions.shape[0]),
        classes=classes,
        dtype=predictions.dtype.str,
        meta=check_meta(meta or {}),
        source=None if source == stored else source,
    )
    return Prepared(record=rec, data=data)


def _exists(dataset: str, model: str, held: str, new: str | None) -> TagExistsError:
    return TagExistsError(
        f"model {model!r} of {dataset!r} is recorded already, as result {short(held)} with "
        "other predictions or meta; a recorded result is immutable: choose another model name, "
        "or replace it with --force (the log keeps the old one); nothing was recorded",
        dataset=dataset,
        tag=model,
        existing=held,
        new=new,
    )


def refuse_conflict(reg: Registry, p: Prepared, *, force: bool) -> None:
    """Raise ``TagExistsError`` if the model is recorded with another record and not ``force``
    (checked for every model before any is recorded)."""
    held = result_refs(reg).current(p.record.dataset, p.record.model, force=force)
    if held is not None and not force and held != p.digest:
        raise _exists(p.record.dataset, p.record.model, held, p.digest)


def record_result(
    reg: Registry, p: Prepared, *, force: bool = False, command: str = ""
) -> Recorded:
    """Store a prepared record and point its model ref at it. The objects are written before
    the ref, so a ref always names stored objects; a refused record (``TagExistsError``)
    leaves the ref and its log as they were (the objects, named by nothing, go at the next
    gc). The same record again is a no-op: nothing is written; if its objects are damaged it
    is refused (``IntegrityError`` naming them), and with ``force`` they are stored again."""
    rec = p.record
    refs = result_refs(reg)
    digest = p.digest
    old: str | None = None
    if refs.current(rec.dataset, rec.model, force=force) == digest:
        status = "unchanged"
        try:
            load_predictions(reg, read_result(reg, digest))
        except IntegrityError:
            if not force:
                raise  # damaged: refused, named; --force stores the bytes again
            reg.store.replace_corrupt(rec.predictions, p.data)  # each only if damaged
            reg.store.replace_corrupt(digest, rec.encode())
            load_predictions(reg, read_result(reg, digest))
            status = "repaired"
    else:
        reg.store.put_bytes(p.data)
        reg.store.put_bytes(rec.encode())
        try:
            old = refs.set(
                rec.dataset, rec.model, digest, force=force, command=command, event=EVENT
            )
        except TagExistsError as e:
            raise _exists(rec.dataset, rec.model, e.existing or "", digest) from None
        status = "recorded" if old is None else "moved"
    return Recorded(
        dataset=rec.dataset,
        model=rec.model,
        digest=digest,
        predictions=rec.predictions,
        source=rec.given,
        status=status,
        old=old,
    )


def read_result(reg: Registry, digest: str) -> ResultRecord:
    """A stored record, re-hashed and parsed (``IntegrityError`` if damaged)."""
    return ResultRecord.decode(reg.store.read_bytes(digest), digest=digest)


def list_results(reg: Registry, dataset: str) -> dict[str, str]:
    """``{model: record digest}`` of one dataset, sorted by model."""
    return result_refs(reg).tags(dataset)


def resolve_result(reg: Registry, dataset: str, model: str) -> tuple[str, ResultRecord]:
    """The record ``model`` of ``dataset`` names; ``NotFoundError`` listing the recorded models
    when there is none."""
    check_name(model, what="model name")
    digest = result_refs(reg).get(dataset, model)
    if digest is None:
        known = ", ".join(list_results(reg, dataset)) or "none"
        raise NotFoundError(
            f"no model {model!r} is recorded for {dataset!r} (recorded: {known}); record one "
            "with 'dsreg eval SPEC PREDS --record --model NAME'"
        )
    return digest, checked_record(reg, dataset, model, digest)


def checked_record(reg: Registry, dataset: str, model: str, digest: str) -> ResultRecord:
    """The record ``digest`` that model ref ``dataset/model`` names, read (re-hashed) and
    refused (``ManifestError``) if it is another dataset's or model's."""
    rec = read_result(reg, digest)
    if rec.dataset != dataset or rec.model != model:
        raise ManifestError(
            f"model ref {dataset}/{model} names result {short(digest)} of "
            f"{rec.dataset}/{rec.model}; {record_again(dataset, model)}"
        )
    return rec


@functools.lru_cache(maxsize=256)
def _header(dtype: str, shape: tuple[int, ...]) -> bytes:
    """The ``.npy`` header ``encode_predictions`` writes for ``dtype`` and ``shape``."""
    buf, descr = io.BytesIO(), np.lib.format.dtype_to_descr(np.dtype(dtype))
    np.lib.format.write_array_header_1_0(
        buf, {"descr": descr, "fortran_order": False, "shape": shape}
    )
    return buf.getvalue()


def load_predictions(reg: Registry, rec: ResultRecord) -> np.ndarray:
    """A record's predictions, re-hashed: read whole when small and headed as dsreg writes
    them (a leaderboard of many tasks reads thousands), else memory-mapped; ``IntegrityError``
    if the object is damaged or does not hold what the record says."""
    shape = (rec.rows,) if rec.kind == "labels" else (rec.rows, rec.classes)
    size = math.prod(shape) * np.dtype(rec.dtype).itemsize
    if rec.kind != "topk" and size <= _READ_WHOLE:
        data = reg.store.read_bytes(rec.predictions)
        head = _header(rec.dtype, shape)
        if data.startswith(head) and len(data) == len(head) + size:
            return np.frombuffer(data, dtype=rec.dtype, offset=len(head)).reshape(shape)
    path = reg.store.verified_path(rec.predictions)
    try:
        arr: np.ndarray = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError, SyntaxError) as e:
        raise IntegrityError(
            f"the predictions {short(rec.predictions)} of model {rec.model!r} cannot be read "
            f"({e}); {record_again(rec.dataset, rec.model)}"
        ) from None
    want = shape
    if rec.kind == "topk" and arr.ndim == 2 and 0 < arr.shape[1] < rec.classes:
        want = (rec.rows, arr.shape[1])  # a top-m array: m is its own
    if arr.shape != want or arr.dtype.str != rec.dtype:
        raise IntegrityError(
            f"the predictions {short(rec.predictions)} of model {rec.model!r} hold "
            f"{arr.dtype} {arr.shape}, not the {rec.dtype} {want} its record says; "
            f"{record_again(rec.dataset, rec.model)}"
        )
    return arr


def check_values(rec: ResultRecord, arr: np.ndarray) -> None:
    """Refuse (``PredictionsError``) stored predictions holding what recording refuses (NaN,
    infinite, negative or all-zero probabilities, classes out of range, a top-m row naming a
    class twice): ``verify`` applies it, as an object can hash right and hold such values."""
    what = f"the predictions {short(rec.predictions)} of model {rec.dataset}/{rec.model}"
    if rec.kind == "probabilities":
        inputfiles.check_probabilities(arr, what)
    elif rec.kind == "labels" and (bad := inputfiles.out_of_range(arr, rec.classes)):
        raise PredictionsError(
            f"{what}: {bad.total} labels are outside [0, {rec.classes}), first {bad.first[0]} "
            f"at row {bad.at[0]}"
        )
    elif rec.kind == "topk":
        for rows, why in inputfiles.topk_faults(arr, rec.classes):
            if len(rows):
                raise PredictionsError(f"{what}: {len(rows)} rows name {why}, first row {rows[0]}")


def _model_refs(reg: Registry) -> tuple[list[tuple[str, str]], list[Problem]]:
    """(``dataset/model``, record digest) of each model ref, and a problem for each damaged
    one (its file holds no digest)."""
    refs = result_refs(reg)
    named: list[tuple[str, str]] = []
    damaged: list[Problem] = []
    for ds in refs.datasets():
        for model, digest in refs.entries(ds).items():
            if isinstance(digest, DsregError):
                damaged.append(Problem(digest=f"results/{ds}/{model}", problem=str(digest)))
            else:
                named.append((f"{ds}/{model}", digest))
    return named, damaged


def _records(reg: Registry, logged: Iterable[str], named: list[tuple[str, str]]) -> set[str]:
    """Record digests to keep: every model ref's (``named``), and those result log lines name
    (``logged``: the digests log lines younger than the expiry name)."""
    refs = result_refs(reg)
    records = {d for _, d in named}
    for ds in refs.logged_datasets():
        records.update(e.new for e in refs.log(ds) if e.event == EVENT and e.new)
    return records & ({d for _, d in named} | set(logged))


def recorded_digests(reg: Registry) -> set[str]:
    """The records every model ref names (what keeps them, apart from the log)."""
    refs = result_refs(reg)
    return {d for ds in refs.datasets() for d in refs.tags(ds).values()}


def result_objects(reg: Registry, logged: Iterable[str]) -> set[str]:
    """What recorded results keep from gc: each kept record and its predictions. A damaged
    model ref, or a record that cannot be read, raises: what it would keep cannot be known."""
    named, damaged = _model_refs(reg)
    if damaged:
        raise ManifestError(damaged[0].problem)
    records = _records(reg, logged, named)
    out = set(records)
    for d in records:
        if reg.store.has(d):
            out.add(read_result(reg, d).predictions)
    return out


def result_problems(reg: Registry, logged: Iterable[str]) -> tuple[set[str], list[Problem]]:
    """For verify: the objects recorded results name (to re-hash), and the problems of those
    that cannot be used, as their readers (``leaderboard``, ``cite --model``) would refuse
    them: a damaged model ref, a missing or damaged record, predictions not of the recorded
    shape, or holding values a reader refuses (``check_values``)."""
    named, problems = _model_refs(reg)
    records = _records(reg, logged, named)
    targets = set(records)
    for d in sorted(records):
        whose = next((w for w, r in named if r == d), None)
        try:
            rec = read_result(reg, d)
            targets.add(rec.predictions)
            if reg.store.has(rec.predictions):
                check_values(rec, load_predictions(reg, rec))
        except DsregError as e:
            where = f"model ref {whose}" if whose else "a result log line"
            problems.append(Problem(digest=d, problem=f"{where}: {e}"))
    return targets, problems

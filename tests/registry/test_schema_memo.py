"""The schema-check memo (``state/schema-checked/``) skips only the schema check of a manifest
whose verified bytes passed it before: the hash check runs on every read, so no memo can make
damaged or hostile bytes pass, and a memo that is missing or cannot be written costs only the
check again."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsreg
from dsreg.errors import CorruptObjectError, ManifestError
from dsreg.formats import manifests
from dsreg.formats.canonical import canonical_bytes
from dsreg.objects.hashing import hash_bytes
from dsreg.registry.folder import Registry
from dsreg.registry.reader import LocalReader
from dsreg.registry.schemamemo import FOLDER

TALLY: dict[str, int] = {}


@pytest.fixture
def reg(make_registry: Callable[..., Registry], tmp_path: Path) -> Registry:
    (tmp_path / "labels.csv").write_text("label\n" + "cat\ndog\n" * 3)
    r = make_registry()
    dsreg.add("lab", labels=tmp_path / "labels.csv", tag="original", registry=r)
    return r


@pytest.fixture
def schema_checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The schema names ``decode_manifest`` checks a stored manifest against, in order."""
    seen: list[str] = []
    real = manifests.validate

    def counting(obj: object, name: str, *, what: str) -> None:
        seen.append(name)
        real(obj, name, what=what)

    monkeypatch.setattr(manifests, "validate", counting)
    yield seen


def _memo(reg: Registry, digest: str) -> Path:
    folder = reg.schema_memo.folder
    assert folder is not None
    return folder / digest.removeprefix("blake3:")


def _snapshot(reg: Registry) -> str:
    return LocalReader(reg).revision("lab@original").revision.snapshot


def _replace(reg: Registry, digest: str, data: bytes) -> None:
    """Put ``data`` where object ``digest`` lies (read-only, as objects are)."""
    path = reg.store.path(digest)
    os.chmod(path, 0o644)
    path.write_bytes(data)
    os.chmod(path, 0o444)


def test_a_read_remembers_and_the_next_read_skips_only_the_schema_check(
    reg: Registry, schema_checks: list[str]
) -> None:
    snap = _snapshot(reg)
    shutil.rmtree(reg.root / "state" / FOLDER, ignore_errors=True)
    first = reg.snapshot(snap)
    assert schema_checks == ["snapshot"]
    assert _memo(reg, snap).is_file()
    assert _memo(reg, snap).stat().st_size == 0
    assert reg.snapshot(snap) == first
    assert schema_checks == ["snapshot"]  # not checked again


def test_hostile_bytes_under_a_remembered_digest_are_refused(reg: Registry) -> None:
    snap = _snapshot(reg)
    reg.snapshot(snap)
    assert _memo(reg, snap).is_file()
    hostile = canonical_bytes({"schema": manifests.SNAPSHOT, "classes": "not a list"})
    _replace(reg, snap, hostile)
    with pytest.raises(CorruptObjectError, match=snap.removeprefix("blake3:")[:12]):
        reg.snapshot(snap)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_damaged_byte_of_a_remembered_manifest_is_refused(
    reg: Registry, data: st.DataObject
) -> None:
    TALLY["damaged byte"] = TALLY.get("damaged byte", 0) + 1
    snap = _snapshot(reg)
    reg.snapshot(snap)
    assert _memo(reg, snap).is_file()
    path = reg.store.path(snap)
    good = path.read_bytes()
    at = data.draw(st.integers(0, len(good) - 1), label="at")
    value = data.draw(st.integers(0, 255).filter(lambda v: v != good[at]), label="value")
    try:
        _replace(reg, snap, good[:at] + bytes([value]) + good[at + 1 :])
        with pytest.raises(CorruptObjectError):
            reg.snapshot(snap)
    finally:
        _replace(reg, snap, good)


def test_deleting_the_memo_checks_again(reg: Registry, schema_checks: list[str]) -> None:
    snap = _snapshot(reg)
    reg.snapshot(snap)
    shutil.rmtree(reg.root / "state")
    reg.snapshot(snap)
    assert schema_checks[-1:] == ["snapshot"]
    assert _memo(reg, snap).is_file()  # and remembered again


def test_a_failed_schema_check_writes_no_memo(reg: Registry) -> None:
    bad = canonical_bytes({"schema": manifests.REVISION, "snapshot": 7, "view": "sideways"})
    digest = reg.store.put_bytes(bad)
    for _ in range(2):
        with pytest.raises(ManifestError, match="breaks schema 'revision'"):
            reg.manifest(digest)
        assert not _memo(reg, digest).exists()


def test_a_memo_of_another_schema_version_is_not_used(
    reg: Registry, schema_checks: list[str]
) -> None:
    snap = _snapshot(reg)
    reg.snapshot(snap)
    folder = reg.schema_memo.folder
    assert folder is not None
    # Memos made under other schemas live in another folder and are not read.
    folder.rename(folder.with_name("0" * 16))
    reg.snapshot(snap)
    assert schema_checks[-1:] == ["snapshot"]


def test_a_registry_whose_state_cannot_be_written_still_reads(
    reg: Registry, schema_checks: list[str]
) -> None:
    snap = _snapshot(reg)
    shutil.rmtree(reg.root / "state", ignore_errors=True)
    (reg.root / "state").write_text("not a folder")  # nothing can be made below it
    fresh = Registry(reg.root)
    for _ in range(2):
        assert fresh.snapshot(snap).dataset == "lab"
    assert schema_checks == ["snapshot", "snapshot"]  # checked each time, nothing remembered


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
def test_a_read_only_registry_still_reads(reg: Registry, schema_checks: list[str]) -> None:
    snap = _snapshot(reg)
    shutil.rmtree(reg.root / "state", ignore_errors=True)
    os.chmod(reg.root, 0o555)
    try:
        assert Registry(reg.root).snapshot(snap).dataset == "lab"
        assert schema_checks == ["snapshot"]
    finally:
        os.chmod(reg.root, 0o755)


def test_a_stored_manifest_is_remembered_and_its_digest_needs_no_schema(
    reg: Registry, schema_checks: list[str]
) -> None:
    rev = LocalReader(reg).revision("lab@original").revision
    view = manifests.Revision(snapshot=rev.snapshot, view="cleaned")
    digest = reg.store_revision(view)
    assert digest == view.digest
    assert _memo(reg, digest).is_file()
    seen = len(schema_checks)
    assert reg.digest_of(view) == digest
    assert reg.revision(digest) == view
    assert len(schema_checks) == seen


def test_a_manifest_that_breaks_its_schema_is_not_stored(reg: Registry) -> None:
    rev = LocalReader(reg).revision("lab@original").revision
    bad = manifests.Revision(snapshot=rev.snapshot, view="sideways")  # type: ignore[arg-type]
    digest = hash_bytes(manifests.canonical_manifest(bad))
    with pytest.raises(ManifestError, match="breaks schema 'revision'"):
        reg.put_manifest(bad)
    with pytest.raises(ManifestError, match="breaks schema 'revision'"):
        reg.digest_of(bad)
    assert not reg.store.has(digest)
    assert not _memo(reg, digest).exists()


def teardown_module() -> None:
    print(f"\nhypothesis cases: {TALLY}")


def test_verify_checks_every_schema_whatever_the_memo_says(
    reg: Registry, schema_checks: list[str]
) -> None:
    snap = _snapshot(reg)
    reg.snapshot(snap)
    assert _memo(reg, snap).is_file()
    before = schema_checks.count("snapshot")
    assert dsreg.verify(registry=reg).ok
    assert schema_checks.count("snapshot") == before + 1

"""An audit's fingerprints tables travel with the revision that applies its overlay: pushed,
pulled and cloned as any object it reaches, so a copy of the registry audits again without
fingerprinting a payload (docs/audit.md, "Fingerprints, stored and reused")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import dsreg
from dsreg.audit.corpus import jpeg, photo_tiles
from dsreg.audit.duplicates import AuditResult
from dsreg.registry.folder import Registry


def _audited(reg: Registry, tmp_path: Path) -> AuditResult:
    """``train@v1`` (tiles 0-5), ``test@v1`` (tiles 0 and 1 re-encoded, 6 and 7 new) and
    ``test@clean``, its audit against the training set."""
    tiles = photo_tiles(8, seed=3, side=96)
    for name, files in (
        ("train", {f"c{i % 2}/t{i}.jpg": jpeg(tiles[i]) for i in range(6)}),
        ("test", {f"c{i % 2}/s{i}.jpg": jpeg(tiles[i], quality=40) for i in (0, 1, 6, 7)}),
    ):
        for rel, data in files.items():
            (tmp_path / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name / rel).write_bytes(data)
        dsreg.add(name, tmp_path / name, tag="v1", registry=reg)
    res = dsreg.audit_duplicates("test@v1", against=["train@v1"], tag="clean", registry=reg)
    assert res.fingerprints["computed"] == 4 + 6
    assert {f.example_id for f in res.findings} == {"c0/s0.jpg", "c1/s1.jpg"}
    return res


def test_a_clone_audits_again_with_the_fingerprints_it_fetched(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    origin = make_registry("origin")
    first = _audited(origin, tmp_path)
    assert first.digest is not None
    held = set(origin.overlay(first.digest).held)
    dsreg.remote_add("origin", str(tmp_path / "remote"), default=True, registry=origin)
    dsreg.push(["test@v1", "test@clean", "train@v1"], registry=origin)

    clone = Registry(Path(dsreg.clone(str(tmp_path / "remote"), tmp_path / "clone").registry))
    # The clone is lazy: no payload came, the fingerprints tables did.
    assert held <= set(clone.store)
    payloads = {d for d in origin.store if d not in clone.store}
    assert payloads and not payloads & held
    checked = dsreg.verify(registry=clone)
    assert checked.ok and not held & set(checked.not_fetched)

    again = dsreg.audit_duplicates("test@v1", against=["train@v1"], registry=clone)
    assert again.fingerprints == {"computed": 0, "reused": 4}
    assert (again.digest, again.findings) == (first.digest, first.findings)
    # Nothing was fingerprinted, so no payload had to be fetched for it.
    assert payloads.isdisjoint(clone.store)


def test_a_pull_brings_the_fingerprints_and_gc_keeps_them(
    make_registry: Callable[..., Registry], tmp_path: Path
) -> None:
    origin = make_registry("origin")
    first = _audited(origin, tmp_path)
    assert first.digest is not None
    dsreg.remote_add("nas", str(tmp_path / "nas"), registry=origin)
    dsreg.push(["test@v1", "test@clean", "train@v1"], remote="nas", registry=origin)

    fresh = make_registry("fresh")
    dsreg.pull(["test@v1", "test@clean", "train@v1"], remote=str(tmp_path / "nas"), registry=fresh)
    held = set(fresh.overlay(first.digest).held)
    assert len(held) == 2 and held <= set(fresh.store)
    assert not held & set(dsreg.gc(registry=fresh).removed)
    again = dsreg.audit_duplicates("test@v1", against=["train@v1"], registry=fresh)
    assert again.fingerprints["computed"] == 0
    assert again.digest == first.digest

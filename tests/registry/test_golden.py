"""Golden vectors: digests of fixed content, pinned forever in ``tests/golden/digests.json``.

A change to dsreg (or to a library under it) that alters the digest of content that already
exists breaks every citation of it: these tests fail on any such change. New vectors may be
added to the file; an existing one is never edited.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from golden_sources import source_digests

import dsreg
from dsreg import ManifestError, Overlay, Registry, Revision, Snapshot
from dsreg.formats.canonical import canonical_bytes, parse_json
from dsreg.formats.manifests import encode_manifest
from dsreg.formats.tables import parquet_bytes
from dsreg.objects.hashing import hash_bytes
from dsreg.overlays.write import corrections_table, write_overlay

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "digests.json"

# Fixed manifests: every field spelled out, so their canonical bytes can only change if the
# canonicalisation or the manifest encoding does.
FIXED_SNAPSHOT = Snapshot(
    dataset="imagenet-val",
    examples="blake3:" + "ab" * 32,
    rows=50000,
    classes=("tench", "goldfish", "great white shark", "€uro ünïcode"),
    source={"kind": "imagefolder", "origin": "ILSVRC2012_img_val.tar", "ratio": 0.5},
)
FIXED_OVERLAY = Overlay(
    base="blake3:" + "01" * 32,
    kind="detected",
    corrections="blake3:" + "cd" * 32,
    producer={
        "name": "dsreg.detect",
        "version": "1",
        "params": {"filter_by": "prune_by_noise_rate", "frac_noise": 1.0, "min_examples": 5},
        "inputs": {"pred_probs": "blake3:" + "ef" * 32},
    },
    summary={"rows": 3, "suspected": 3},
)
FIXED_REVISION = Revision(
    snapshot="blake3:" + "01" * 32,
    overlays=("blake3:" + "02" * 32, "blake3:" + "03" * 32),
    view="corrected",
)


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def _content_digests(tmp: Path, golden_tree: Callable[[Path], Path]) -> dict[str, Any]:
    """The digests of the golden tree, label-only set and overlay, as dsreg computes them now."""
    reg = dsreg.init(registry=tmp / "reg")
    tree = golden_tree(tmp / "tree")
    added = dsreg.add("golden", tree, tag="original", registry=reg)
    labels_npy = tmp / "labels.npy"
    np.save(labels_npy, np.array([0, 1, 2, 1, 0, 2, 2], dtype=np.int64))
    lab = dsreg.add("golden-labels", labels=labels_npy, tag="original", registry=reg)
    table = corrections_table(
        rows=np.array([1, 4]),
        example_ids=["cat/1.bin", "dog/nested/c.jpg"],
        given_label=np.array([0, 1]),
        suggested_label=np.array([2, 0]),
        verdict=["suspected", "suspected"],
        score=np.array([0.125, 0.25]),
    )
    producer = {"name": "golden", "version": "1", "params": {}, "inputs": {}}
    ov = write_overlay(reg, base=added.snapshot, kind="detected", table=table, producer=producer)
    corrected = dsreg.tag(
        "golden@corrected", "golden@original", overlays=[ov], view="corrected", registry=reg
    )
    ex = _examples(reg, added.revision)
    blobs = dict(
        zip(ex.column("example_id").to_pylist(), ex.column("blob").to_pylist(), strict=True)
    )
    return {
        "imagefolder": {
            "blobs": blobs,
            "examples": added.examples,
            "snapshot": added.snapshot,
            "revision": added.revision,
        },
        "labels": {"examples": lab.examples, "snapshot": lab.snapshot, "revision": lab.revision},
        "overlay": {
            "corrections": hash_bytes(parquet_bytes(table)),
            "overlay": ov,
            "corrected_revision": corrected.revision,
        },
    }


def _examples(reg: Registry, revision: str) -> pa.Table:
    """The rows of an original revision: every example of its snapshot, in order."""
    return dsreg.open(revision, registry=reg).labels()


def test_blake3_is_the_reference_blake3(golden: dict[str, Any]) -> None:
    # The official BLAKE3 test vectors (input i is bytes(j % 251 for j in range(n))).
    for vec in golden["blake3"]:
        data = bytes(j % 251 for j in range(vec["length"]))
        assert hash_bytes(data) == vec["digest"], vec["length"]


def test_content_digests_are_pinned(
    tmp_path: Path, golden: dict[str, Any], golden_tree: Callable[[Path], Path]
) -> None:
    got = _content_digests(tmp_path, golden_tree)
    assert got["imagefolder"]["blobs"] == golden["imagefolder"]["blobs"]
    assert got["imagefolder"] == golden["imagefolder"], (
        f"the digest of existing content changed (pyarrow {pa.__version__}; pinned with "
        f"pyarrow {golden['written_with']['pyarrow']}): a snapshot cited before would no "
        "longer resolve to these bytes"
    )
    assert got["labels"] == golden["labels"]
    assert got["overlay"] == golden["overlay"]


@pytest.mark.parametrize(
    ("name", "manifest"),
    [("snapshot", FIXED_SNAPSHOT), ("overlay", FIXED_OVERLAY), ("revision", FIXED_REVISION)],
)
def test_fixed_manifests_have_pinned_canonical_bytes(
    name: str, manifest: Snapshot | Overlay | Revision, golden: dict[str, Any]
) -> None:
    want = golden["manifests"][name]
    data = encode_manifest(manifest)
    assert data.decode("utf-8") == want["canonical"]
    assert hash_bytes(data) == want["digest"]


def test_rfc8785_examples_canonicalise_as_the_rfc_says(golden: dict[str, Any]) -> None:
    for case in golden["jcs"]:
        data = canonical_bytes(json.loads(case["input"]))
        assert data.decode("utf-8") == case["canonical"], case["name"]
        assert hash_bytes(data) == case["digest"], case["name"]


def test_rfc8785_number_serialisation(golden: dict[str, Any]) -> None:
    # RFC 8785 appendix B: IEEE 754 doubles by bit pattern, and how JCS writes them.
    for case in golden["jcs_numbers"]:
        value = struct.unpack(">d", bytes.fromhex(case["ieee"]))[0]
        assert canonical_bytes(value).decode() == case["canonical"], case["ieee"]


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), -float("inf"), 2**53 + 1, {"a": [-(2**60) - 1]}, 10**400]
)
def test_values_json_cannot_hold_exactly_are_refused(value: object) -> None:
    with pytest.raises(ManifestError, match="cannot canonicalise"):
        canonical_bytes(value)


def test_big_numbers_a_double_holds_survive_a_round_trip() -> None:
    # 1e16 is written as digits, which json.loads reads back as an int: re-encoding what was
    # read must give the same bytes (a manifest read from the store can be hashed again).
    for value in (1e16, 2.0**53, -(2.0**60), 1e300, 2.649496473057253e16):
        data = canonical_bytes({"x": value})
        again = parse_json(data, what="test")
        assert again == {"x": value}
        assert canonical_bytes(again) == data
    assert canonical_bytes(2**53) == b"9007199254740992"
    assert canonical_bytes(10**16) == canonical_bytes(1e16) == b"10000000000000000"


def test_same_manifest_from_other_json_text_has_the_same_digest() -> None:
    # Key order, whitespace, escapes and number spelling of the input do not matter.
    a = json.loads(
        '{"view":"original","overlays":[],"snapshot":"blake3:' + "01" * 32 + '",'
        '"schema":"dsreg/revision/1"}'
    )
    b = json.loads(
        '{ "schema" : "dsreg\\/revision\\/1", "snapshot": "blake3:' + "01" * 32 + '",'
        ' "overlays": [ ], "view": "\\u006friginal" }'
    )
    assert canonical_bytes(a) == canonical_bytes(b)
    assert hash_bytes(canonical_bytes(a)) == Revision(snapshot="blake3:" + "01" * 32).digest


def test_label_file_and_table_sources_have_pinned_digests(
    tmp_path: Path, golden: dict[str, Any]
) -> None:
    # Pinned with a whole-table writer: the streaming writer must give every table, one row
    # group or several, the bytes one writer of the whole table gives.
    reg = dsreg.init(registry=tmp_path / "reg")
    assert source_digests(tmp_path, reg) == golden["sources"]


# Version 2: an overlay whose corrections carry label sets and raters' counts, and a
# revision in the multilabel view. Pinned when they were added; version 1 content is above.
FIXED_OVERLAY_2 = Overlay(
    base="blake3:" + "01" * 32,
    kind="validated",
    corrections="blake3:" + "cd" * 32,
    producer={
        "name": "dsreg.import-labels",
        "version": "1",
        "params": {"format": "real", "match": "file_name"},
        "inputs": {"labels": "blake3:" + "ef" * 32},
    },
    summary={"rows": 3, "non_error": 1, "multi_label": 1, "neither": 1},
    version=2,
)
FIXED_MULTILABEL = Revision(
    snapshot="blake3:" + "01" * 32, overlays=("blake3:" + "02" * 32,), view="multilabel"
)


def _version_2_table() -> pa.Table:
    from dsreg.formats.corrections import LABEL_COUNTS_TYPE, LabelSets

    return corrections_table(
        rows=np.array([0, 3, 5]),
        example_ids=["a/ILSVRC2012_val_00000001.JPEG", "b/x.JPEG", "c/y.JPEG"],
        given_label=np.array([0, 1, 2]),
        suggested_label=np.array([-1, -1, -1]),
        verdict=["non_error", "multi_label", "neither"],
        label_sets=LabelSets(
            labels=pa.array([[0, 3], [2, 3], []], pa.list_(pa.int32())),
            label_counts=pa.array(
                [[{"label": 0, "count": 4}, {"label": 3, "count": 1}], None, None],
                LABEL_COUNTS_TYPE,
            ),
        ),
    )


def test_version_2_content_has_pinned_digests(golden: dict[str, Any]) -> None:
    want = golden["version_2"]
    table = _version_2_table()
    assert hash_bytes(parquet_bytes(table)) == want["corrections"]
    for name, manifest in (("overlay", FIXED_OVERLAY_2), ("revision", FIXED_MULTILABEL)):
        data = encode_manifest(manifest)
        assert data.decode("utf-8") == want[name]["canonical"], name
        assert hash_bytes(data) == want[name]["digest"], name

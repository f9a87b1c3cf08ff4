"""Manifests and names: round trips (hypothesis), schema checks, spec parsing."""

from __future__ import annotations

import json
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg.errors import InvalidNameError, InvalidSpecError, ManifestError
from dsreg.formats.canonical import canonical_bytes
from dsreg.formats.manifests import (
    KINDS,
    VIEWS,
    Overlay,
    Revision,
    Snapshot,
    decode_manifest,
    encode_manifest,
)
from dsreg.formats.names import check_name, parse_spec, parse_tag_target
from dsreg.objects.digest import short
from dsreg.objects.hashing import hash_bytes

NAME_CHARS = string.ascii_lowercase + string.digits + "._-"
names = st.builds(
    lambda first, rest: first + rest,
    st.sampled_from(string.ascii_lowercase + string.digits),
    st.text(NAME_CHARS, max_size=63),
)
digests = st.binary(min_size=1, max_size=16).map(hash_bytes)
# JSON values that survive canonical JSON unchanged: ints in the I-JSON range, finite floats,
# any unicode text (lone surrogates cannot be UTF-8 encoded, so they are left out).
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
snapshots = st.builds(
    Snapshot,
    dataset=names,
    examples=digests,
    rows=st.integers(0, 2**40),
    classes=st.lists(texts.filter(bool), min_size=1, max_size=6).map(tuple),
    source=st.builds(
        lambda kind, extra: {**extra, "kind": kind},
        st.sampled_from(["imagefolder", "labels", "table", "dvc"]),
        st.dictionaries(texts, json_values, max_size=3),
    ),
)
overlays = st.builds(
    Overlay,
    base=digests,
    kind=st.sampled_from(KINDS),
    corrections=digests,
    producer=st.builds(
        lambda name, version, params, inputs: {
            "name": name,
            "version": version,
            "params": params,
            "inputs": inputs,
        },
        texts.filter(bool),
        texts.filter(bool),
        st.dictionaries(texts, json_values, max_size=3),
        st.dictionaries(texts, digests, max_size=2),
    ),
    summary=st.builds(
        lambda rows, extra: {**extra, "rows": rows},
        st.integers(0, 10**9),
        st.dictionaries(texts, json_values, max_size=3),
    ),
)
revisions = st.builds(
    Revision,
    snapshot=digests,
    overlays=st.lists(digests, unique=True, max_size=4).map(tuple),
    view=st.sampled_from(VIEWS),
)
manifests = snapshots | overlays | revisions


def _same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values (-0.0 and 0 are one number; canonical JSON writes both as 0)."""
    return canonical_bytes(a) == canonical_bytes(b)


@settings(max_examples=150, deadline=None)
@given(manifests)
def test_manifest_dict_round_trip(m: Snapshot | Overlay | Revision) -> None:
    assert type(m).from_dict(m.to_dict()) == m


@settings(max_examples=150, deadline=None)
@given(manifests)
def test_manifest_encode_decode_round_trip(m: Snapshot | Overlay | Revision) -> None:
    data = encode_manifest(m)
    back = decode_manifest(data, digest=hash_bytes(data))
    assert type(back) is type(m)
    assert _same_json(back.to_dict(), m.to_dict())
    # Canonical: encoding what was decoded gives the same bytes, so the same digest.
    assert encode_manifest(back) == data
    # And the bytes are plain UTF-8 JSON any program can read back.
    assert json.loads(data.decode("utf-8")).keys() == m.to_dict().keys()


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(texts, json_values, max_size=6))
def test_canonical_bytes_ignore_key_order_and_whitespace(d: dict[str, Any]) -> None:
    reordered = dict(reversed(list(d.items())))
    pretty = json.loads(json.dumps(reordered, indent=3, ensure_ascii=True))
    assert canonical_bytes(pretty) == canonical_bytes(d)


@settings(max_examples=150, deadline=None)
@given(names, names)
def test_spec_parsing_round_trip(dataset: str, tag: str) -> None:
    s = parse_spec(f"{dataset}@{tag}")
    assert (s.dataset, s.ref, s.digest) == (dataset, tag, None)
    assert str(s) == f"{dataset}@{tag}"
    assert parse_tag_target(f"{dataset}@{tag}") == (dataset, tag)
    assert check_name(dataset) == dataset


@settings(max_examples=100, deadline=None)
@given(digests, names)
def test_digest_specs_parse(digest: str, dataset: str) -> None:
    s = parse_spec(digest)
    assert (s.dataset, s.ref, s.digest) == (None, None, digest)
    assert str(s) == digest
    prefix = parse_spec(f"{dataset}@{short(digest)}")
    assert prefix.could_be_prefix and prefix.ref == short(digest)
    full = parse_spec(f"{dataset}@{digest}")
    assert full.could_be_prefix and full.ref == digest


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=70))
def test_names_outside_the_alphabet_are_refused(text: str) -> None:
    ok = (
        0 < len(text) <= 64
        and text[0] in string.ascii_lowercase + string.digits
        and all(c in NAME_CHARS for c in text)
    )
    if ok:
        assert check_name(text) == text
    else:
        with pytest.raises(InvalidNameError, match="invalid"):
            check_name(text)


@pytest.mark.parametrize(
    "name",
    ["", "Imagenet", "-val", ".hidden", "_x", "a/b", "a b", "a@b", "x" * 65, "val\n", "ü", ".."],
)
def test_invalid_names_name_the_value(name: str) -> None:
    with pytest.raises(InvalidNameError) as e:
        check_name(name, what="dataset name")
    assert repr(name) in str(e.value)


@pytest.mark.parametrize(
    ("spec", "error", "named"),
    [
        ("imagenet-val", InvalidSpecError, "'imagenet-val'"),  # no @
        ("blake3:abc", InvalidSpecError, "'blake3:abc'"),  # a bare digest must be full
        ("blake3:" + "A" * 64, InvalidSpecError, "AAAA"),  # uppercase hex is not a digest
        ("Imagenet@original", InvalidNameError, "'Imagenet'"),
        ("imagenet@Original", InvalidNameError, "'Original'"),
        ("@original", InvalidNameError, "dataset name ''"),
        ("imagenet@", InvalidNameError, "''"),
        ("imagenet@a@b", InvalidNameError, "'a@b'"),
    ],
)
def test_bad_specs_are_refused_naming_the_value(
    spec: str, error: type[Exception], named: str
) -> None:
    with pytest.raises(error) as e:
        parse_spec(spec)
    assert named in str(e.value)


def test_surrounding_whitespace_of_a_spec_is_ignored() -> None:
    d = hash_bytes(b"x")
    assert parse_spec(f"  {d}\n").digest == d
    assert parse_spec(" imagenet@original\n").ref == "original"


def test_digest_with_trailing_newline_is_not_a_digest() -> None:
    from dsreg.objects.digest import format_digest, is_digest

    d = hash_bytes(b"x")
    assert is_digest(d)
    assert not is_digest(d + "\n")
    with pytest.raises(InvalidSpecError):
        format_digest(d + "\n")


def test_manifests_are_checked_against_their_schemas() -> None:
    with pytest.raises(ManifestError, match="snapshot"):
        encode_manifest(Snapshot(dataset="ds", examples="blake3:xyz", rows=1, classes=("a",)))
    with pytest.raises(ManifestError, match="classes"):
        encode_manifest(
            Snapshot(
                dataset="ds",
                examples=hash_bytes(b""),
                rows=1,
                classes=(),
                source={"kind": "labels"},
            )
        )
    with pytest.raises(ManifestError, match="twice"):
        d = hash_bytes(b"o")
        encode_manifest(Revision(snapshot=hash_bytes(b""), overlays=(d, d)))
    bad = canonical_bytes(
        {"schema": "dsreg/revision/1", "snapshot": "nope", "overlays": [], "view": "x"}
    )
    with pytest.raises(ManifestError, match="revision manifest"):
        decode_manifest(bad, digest=hash_bytes(bad))
    with pytest.raises(ManifestError, match="not a dsreg manifest"):
        decode_manifest(b'{"schema": "other"}', digest=hash_bytes(b"1"))
    with pytest.raises(ManifestError, match="not valid JSON"):
        decode_manifest(b"{", digest=hash_bytes(b"1"))

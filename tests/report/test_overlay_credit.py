"""Overlays carry the reference of their source (``--citation FILE.bib``, ``--credit TEXT``), and
``dsreg cite`` of a corrected revision credits the dataset and every overlay it applies."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from creditset import CreditSet, build_credit_set
from hypothesis import given, settings

import dsreg
from dsreg.formats.credit import BibEntry, format_bibtex, parse_bibtex
from dsreg.objects.hashing import hash_file
from dsreg.report.cite import Citation, OverlaySource


def credited(bib: str) -> list[BibEntry]:
    """The entries after the citation's own ``@misc`` (which names no author here)."""
    return parse_bibtex(bib.split("\n}\n", 1)[1])


@pytest.fixture(scope="module")
def credit_set(tmp_path_factory: pytest.TempPathFactory) -> CreditSet:
    return build_credit_set(tmp_path_factory.mktemp("credit"))


def test_cite_of_a_relabeled_revision_credits_the_dataset_and_the_relabeling(
    credit_set: CreditSet,
) -> None:
    cs = credit_set
    c = dsreg.cite(cs.specs["corrected"], registry=cs.reg)
    overlay = cs.overlays["corrected"]
    source = hash_file(cs.inputs["corrected"])
    bib = c.render("bibtex")
    assert [e.key for e in credited(bib)] == ["krizhevsky2009learning", "peterson2019human"]
    assert f"{overlay} (validated, from labels {source})" in bib
    assert "corrections: please also cite peterson2019human" in bib
    text = c.render("text")
    assert "Dataset: Alex Krizhevsky. Learning Multiple Layers" in text
    assert (
        "Corrections: Joshua C. Peterson, Ruairidh M. Battleday, Thomas L. Griffiths and "
        "Olga Russakovsky. Human uncertainty makes classification more robust." in text
    )
    cff = c.render("cff")
    assert cff.count('  - type: "') == 2  # the two references (identifiers: type other)
    assert 'title: "Human uncertainty makes classification more robust"' in cff
    assert f"dsreg overlay 1 (validated, from labels {source})" in cff
    d = c.to_dict()["overlays"][0]
    assert (d["digest"], d["kind"], d["inputs"]) == (overlay, "validated", {"labels": source})
    assert "peterson2019human" in d["credit"]["bibtex"]


def test_cite_of_a_votes_revision_and_of_a_hand_fixed_one(credit_set: CreditSet) -> None:
    cs = credit_set
    votes = dsreg.cite(cs.specs["validated"], registry=cs.reg)
    assert [e.key for e in votes.credit_entries()] == [
        "krizhevsky2009learning",
        "northcutt2021pervasive",
    ]
    assert f"from votes {hash_file(cs.inputs['validated'])}" in votes.render("text")
    manual = dsreg.cite(cs.specs["manual"], registry=cs.reg)
    assert "Corrections: Fixed by hand, 2026" in manual.render("text")
    assert f"corrections {cs.overlays['manual'][7:19]}: Fixed by hand, 2026" in manual.bibtex()
    # The original credits the dataset alone.
    plain = dsreg.cite(cs.specs["original"], registry=cs.reg)
    assert [e.key for e in plain.credit_entries()] == ["krizhevsky2009learning"]
    assert "Corrections" not in plain.render("text")


def test_an_overlay_made_without_credit_keeps_the_digest_it_had(
    make_registry: Callable[..., Any], tmp_path: Path
) -> None:
    """The producer has a credit key only when one is given: the same corrections without
    one give the overlay (and digest) dsreg made before the option existed."""
    reg = make_registry()
    tree = tmp_path / "t"
    for c in ("a", "b"):
        (tree / c).mkdir(parents=True)
        (tree / c / "x.bin").write_bytes(c.encode() * 9)
    dsreg.add("two", tree, tag="v1", registry=reg)
    fixes = tmp_path / "fixes.csv"
    fixes.write_text("row,suggested_label,verdict\n0,1,correctable\n")
    bare = dsreg.import_labels("two@v1", fixes, format="csv", registry=reg)
    again = dsreg.import_labels("two@v1", fixes, format="csv", registry=reg)
    credited = dsreg.import_labels("two@v1", fixes, format="csv", credit="Me", registry=reg)
    assert bare.digest == again.digest != credited.digest
    assert set(reg.overlay(bare.digest).producer) == {"name", "version", "params", "inputs"}
    assert reg.overlay(credited.digest).producer["credit"] == {"text": "Me"}


MALFORMED = "@article{broken, title = {Unclosed, author = {Nobody}\n"


@pytest.mark.parametrize(
    "command",
    [
        ["overlay", "import-votes", "toy@original", "votes.csv", "--format", "csv"],
        ["overlay", "import-labels", "toy@original", "counts.npy", "--format", "counts"],
        ["detect", "toy@original", "--pred-probs", "probs.npy"],
    ],
    ids=["import-votes", "import-labels", "detect"],
)
def test_a_malformed_bib_is_a_one_line_error_and_nothing_is_written(
    command: list[str],
    cli: Callable[..., Any],
    tmp_path: Path,
    registry_state: Callable[[Path], dict[str, Any]],
) -> None:
    cs = build_credit_set(tmp_path / "set")
    import numpy as np

    np.save(cs.root / "probs.npy", np.full((12, 3), 1 / 3))
    (cs.root / "bad.bib").write_text(MALFORMED)
    before = registry_state(cs.reg.root)
    args = [a if not a.endswith((".csv", ".npy")) else str(cs.root / a) for a in command]
    r = cli(*args, "--citation", str(cs.root / "bad.bib"), "--registry", str(cs.reg.root))
    assert r.exit_code == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: --citation ")
    assert "bad.bib, line" in lines[0] and "Traceback" not in r.stderr
    assert registry_state(cs.reg.root) == before


# -- the rendering, for any references --------------------------------------------------------

_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=8)


@st.composite
def entries(draw: st.DrawFn, prefix: str) -> list[BibEntry]:
    n = draw(st.integers(1, 3))
    keys = draw(st.lists(_WORD, min_size=n, max_size=n, unique=True))
    out = []
    for key in keys:
        title = " ".join(draw(st.lists(_WORD, min_size=1, max_size=5))).capitalize()
        authors = " and ".join(
            f"{a.capitalize()}, {b.capitalize()}"
            for a, b in draw(st.lists(st.tuples(_WORD, _WORD), min_size=1, max_size=3))
        )
        year = str(draw(st.integers(1950, 2030)))
        out.append(
            BibEntry(
                type="article",
                key=f"{prefix}{key}",
                fields=(("title", title), ("author", authors), ("year", year)),
            )
        )
    return out


@settings(max_examples=60, deadline=None)
@given(
    dataset=entries("d"),
    overlays=st.lists(entries("o"), min_size=1, max_size=3),
    shared=st.booleans(),
)
def test_every_credited_entry_is_in_the_bibtex_once_and_in_the_cff_references(
    dataset: list[BibEntry], overlays: list[list[BibEntry]], shared: bool
) -> None:
    if shared:  # an overlay repeating the dataset's reference: cited once
        overlays = [[*overlays[0], dataset[0]], *overlays[1:]]
    sources = tuple(
        OverlaySource(
            digest="blake3:" + f"{i:02x}" * 32,
            kind="validated",
            producer="dsreg.import-labels",
            inputs={"labels": "blake3:" + f"{i + 9:02x}" * 32},
            credit={"bibtex": format_bibtex(es)},
        )
        for i, es in enumerate(overlays)
    )
    c = Citation(
        dataset="ds",
        tag="fixed",
        view="corrected",
        rows=3,
        revision="blake3:" + "aa" * 32,
        snapshot="blake3:" + "bb" * 32,
        overlays=tuple((s.digest, s.kind) for s in sources),
        year=2026,
        credit={"bibtex": format_bibtex(dataset)},
        sources=sources,
    )
    want: dict[str, BibEntry] = {}
    for e in [*dataset, *(e for es in overlays for e in es)]:
        want.setdefault(e.key, e)
    got = credited(c.bibtex())
    assert [e.key for e in got] == list(want)
    assert all(e == want[e.key] for e in got)
    cff = c.cff()
    assert cff.count("    title: ") == len(want)
    for e in want.values():
        assert json.dumps(e.get("title")) in cff
    for s in sources:
        assert f"{s.digest} (validated, from labels {s.inputs['labels']})" in c.text()

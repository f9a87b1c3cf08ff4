"""Citations that resolve: the year, the remote URL and the one command that fetches
the revision, the dsreg version, and the dataset creators' credit recorded at ``dsreg add``."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dsreg
from dsreg.errors import ConfigError
from dsreg.report.cite import FORMATS

BIB = """% the creators' paper, as a publisher's page exports it
@inproceedings{northcutt2021pervasive,
  title     = "Pervasive Label Errors in Test Sets Destabilize {Machine Learning} Benchmarks",
  author    = {Northcutt, Curtis G. and Athalye, Anish and Mueller, Jonas},
  booktitle = {NeurIPS Datasets and Benchmarks},
  year      = 2021
}
@comment{ignored}
"""


def _labels(tmp_path: Path, n: int = 12) -> tuple[Path, Path]:
    labels = tmp_path / "labels.npy"
    np.save(labels, np.arange(n) % 3)
    classes = tmp_path / "classes.txt"
    classes.write_text("ant\nbee\ncat\n")
    return labels, classes


def test_a_citation_names_the_year_the_remote_and_the_command_that_fetches_it(
    make_labelset: Any,
) -> None:
    ls = make_labelset(n=30, seed=1)
    rev = dsreg.open("toy@corrected", registry=ls.reg).digest
    bare = dsreg.cite("toy@corrected", registry=ls.reg)
    assert bare.remote is None and bare.command is None
    first = next(e for e in dsreg.log("toy", registry=ls.reg) if e.new == rev)
    assert (bare.year, bare.date) == (int(first.time[:4]), first.time[:10])

    dsreg.remote_add("lab", "https://data.example.org/dsreg", default=True, registry=ls.reg)
    c = dsreg.cite("toy@corrected", registry=ls.reg)
    command = f"dsreg checkout {rev} toy --remote https://data.example.org/dsreg"
    assert c.remote == "https://data.example.org/dsreg" and c.command == command
    for fmt in FORMATS:
        text = c.render(fmt)
        for needle in (command, str(c.year), dsreg.__version__, rev):
            assert needle in text, (fmt, needle)
    assert "url          = {https://data.example.org/dsreg}" in c.bibtex()
    assert f"  year         = {{{c.year}}}," in c.bibtex()

    # --remote overrides the default, and the revision is read through it (as every read with
    # a remote is); the default remote above was named without being contacted.
    folder = ls.reg.root.parent / "other-remote"
    dsreg.push(remote=str(folder), registry=ls.reg)
    other = dsreg.cite("toy@corrected", remote=str(folder), registry=ls.reg)
    assert other.command == f"dsreg checkout {rev} toy --remote {folder}"
    assert other.year == c.year
    with pytest.raises(ConfigError, match="no remote 'nowhere'"):
        dsreg.cite("toy@corrected", remote="nowhere", registry=ls.reg)


def test_cite_cli_warns_when_there_is_no_remote_and_prints_the_command_with_one(
    cli: Callable[..., Any], tmp_path: Path
) -> None:
    labels, classes = _labels(tmp_path)
    assert cli("init").exit_code == 0
    r = cli(
        "add",
        "ants",
        "--labels",
        str(labels),
        "--classes",
        str(classes),
        "--tag",
        "v1",
        "--credit",
        "Ants by A. Lab.",
    )
    assert r.exit_code == 0, r.stderr
    assert "credit    Ants by A. Lab." in cli("show", "ants@v1").stdout
    r = cli("cite", "ants@v1", "--format", "text")
    assert "Dataset: Ants by A. Lab." in r.stdout
    assert r.exit_code == 0 and "no remote" in r.stderr and "dsreg show <digest>" in r.stdout
    remote = tmp_path / "the remote"
    r = cli("cite", "ants@v1", "--format", "text", "--remote", str(remote))
    assert r.exit_code == 0 and "no remote" not in r.stderr
    assert f"--remote '{remote}'" in r.stdout  # quoted for the shell
    r = cli("cite", "ants@v1", "--json", "-r", str(remote))
    doc = json.loads(r.stdout)
    assert doc["remote"] == str(remote) and doc["resolve"].startswith("dsreg checkout blake3:")
    r = cli("cite", "ants@v1", "-r", "nowhere")
    assert r.exit_code == 1 and "Error: no remote 'nowhere'" in r.stderr


def test_the_creators_credit_is_recorded_once_and_repeated_by_every_revision(
    make_registry: Callable[..., Any], tmp_path: Path
) -> None:
    yaml = pytest.importorskip("yaml")
    reg = make_registry()
    labels, classes = _labels(tmp_path)
    bib = tmp_path / "creators.bib"
    bib.write_text(BIB)
    plain = dsreg.add("ants", labels=labels, classes=classes, tag="plain", registry=reg)
    res = dsreg.add(
        "ants",
        labels=labels,
        classes=classes,
        tag="v1",
        citation=bib,
        credit="Ant photos by the Formicidae Society.",
        registry=reg,
    )
    # The credit is content: another snapshot; the one without credit keeps its digest.
    assert res.snapshot != plain.snapshot
    again = dsreg.add("ants", labels=labels, classes=classes, registry=reg)
    assert again.snapshot == plain.snapshot
    source = dsreg.open("ants@v1", registry=reg).describe()["source"]
    assert set(source["credit"]) == {"bibtex", "text"}
    assert "@inproceedings{northcutt2021pervasive," in source["credit"]["bibtex"]
    assert "year = {2021}" in source["credit"]["bibtex"]  # one canonical layout

    dsreg.tag("ants@cleaned", "ants@v1", view="cleaned", registry=reg)
    for spec in ("ants@v1", "ants@cleaned"):
        c = dsreg.cite(spec, registry=reg)
        bibtex = c.bibtex()
        assert "please also cite northcutt2021pervasive" in bibtex
        assert bibtex.count("@inproceedings{northcutt2021pervasive,") == 1
        assert "Ant photos by the Formicidae Society." in bibtex
        text = c.text()
        assert "Curtis G. Northcutt, Anish Athalye and Jonas Mueller" in text
        assert "Pervasive Label Errors in Test Sets Destabilize Machine Learning Benchmarks" in text
        assert "Ant photos by the Formicidae Society." in text
        doc = yaml.safe_load(c.cff())
        assert doc["references"] == [
            {
                "type": "conference-paper",
                "authors": [
                    {"family-names": "Northcutt", "given-names": "Curtis G."},
                    {"family-names": "Athalye", "given-names": "Anish"},
                    {"family-names": "Mueller", "given-names": "Jonas"},
                ],
                "title": "Pervasive Label Errors in Test Sets Destabilize Machine Learning "
                "Benchmarks",
                "year": 2021,
                "collection-title": "NeurIPS Datasets and Benchmarks",
            }
        ]
        assert "Formicidae" in doc["message"]


def test_the_same_tree_with_a_credit_is_a_new_snapshot_not_the_remembered_one(
    make_registry: Callable[..., Any],
    make_imagefolder: Callable[..., Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dsreg.ingest import treescan

    monkeypatch.setattr(treescan, "RACY_NS", 0)  # the first add remembers its scan
    reg = make_registry()
    tree = make_imagefolder("tree", per_class=2)
    first = dsreg.add("pets", tree, tag="v1", registry=reg)
    credited = dsreg.add("pets", tree, credit="Pets by P. Lab.", registry=reg)
    assert credited.snapshot != first.snapshot  # not the remembered answer of the first add
    assert dsreg.cite(credited.revision, registry=reg).credit == {"text": "Pets by P. Lab."}
    assert dsreg.add("pets", tree, registry=reg).revision == first.revision


@pytest.mark.parametrize(
    ("bib", "message"),
    [
        ("no entries here", "holds no BibTeX entry"),
        ("@article{k, title = {T}, year = 2021}", "needs a title and an author"),
        ("@article{k, author = {A}, title = {T", "never closed"),
        ("@article{k, author = {A}, title = {T} # {U}}", "concatenation"),
        ("@misc{k, author={A}, title={T}}\n@misc{k, author={B}, title={U}}", "key 'k' twice"),
    ],
)
def test_a_bad_citation_file_is_refused_and_nothing_is_written(
    cli: Callable[..., Any],
    tmp_path: Path,
    registry_state: Callable[[Path], Any],
    bib: str,
    message: str,
) -> None:
    labels, classes = _labels(tmp_path)
    assert cli("init").exit_code == 0
    path = tmp_path / "bad.bib"
    path.write_text(bib)
    before = registry_state(tmp_path / ".dsreg")
    r = cli(
        "add", "ants", "--labels", str(labels), "--classes", str(classes), "--citation", str(path)
    )
    assert r.exit_code == 1 and r.stderr.startswith("Error: ") and message in r.stderr
    assert str(path) in r.stderr
    r = cli("add", "ants", "--labels", str(labels), "--credit", "  ")
    assert r.exit_code == 1 and "--credit is empty" in r.stderr
    r = cli("add", "ants", "--labels", str(labels), "--citation", str(tmp_path / "missing.bib"))
    assert r.exit_code == 1 and "cannot read --citation" in r.stderr
    assert registry_state(tmp_path / ".dsreg") == before


def test_the_cited_command_fetches_the_revision_on_a_machine_without_a_registry(
    make_registry: Callable[..., Any],
    make_imagefolder: Callable[..., Path],
    dsreg_env: Callable[..., dict[str, str]],
    tmp_path: Path,
) -> None:
    reg = make_registry()
    tree = make_imagefolder("tree", per_class=2)
    dsreg.add("pets", tree, tag="v1", credit="Pets by P. Lab.", registry=reg)
    remote = tmp_path / "published registry"
    dsreg.push(remote=str(remote), registry=reg)
    c = dsreg.cite("pets@v1", remote=str(remote), registry=reg)
    assert c.command is not None
    argv = shlex.split(c.command)
    assert argv[:2] == ["dsreg", "checkout"]
    fresh = tmp_path / "elsewhere"
    (fresh / "home").mkdir(parents=True)
    env = dsreg_env(HOME=str(fresh / "home"), XDG_CACHE_HOME=str(fresh / "cache"))
    main = "import sys; from dsreg.cli import main; main(sys.argv[1:])"
    proc = subprocess.run(
        [sys.executable, "-c", main, *argv[1:]],
        cwd=fresh,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == c.revision
    for f in sorted(tree.rglob("*")):
        if f.is_file():
            assert (fresh / "pets" / f.relative_to(tree)).read_bytes() == f.read_bytes()

"""One revision, the same answers anywhere: every read command and format gives the same output
read from the registry that made a revision, from a folder remote it was published to, from
that remote served over plain HTTP with no registry at all, and, where it shows the same
thing, from the published site (docs/remotes.md, "The history travels"; docs/architecture.md,
"One door").

One registry holds every kind of revision: an image tree with an audit, a label-only set with
human votes, the detector, ReaL-style label sets and CIFAR-10H-style rater counts, three
recorded models, a yanked tag and a retired dataset. It is published to a folder (with a
configured default remote, so its own citations name it), which a loopback HTTP server then
serves. Each command runs three times, in-process: in the registry, with ``--remote FOLDER`` and
with ``--remote URL`` from a folder with no registry (each with a cache of its own); the outputs
are compared byte for byte once the name of the source is replaced by ``<SOURCE>``.
"""

from __future__ import annotations

import functools
import http.server
import io
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import dsreg
from dsreg.cli import main

CLASSES = ["cat", "dog", "fox", "owl"]
N = 48


@dataclass(frozen=True)
class Published:
    root: Path
    reg: Path
    folder: Path
    url: str
    digests: dict[str, str]


def _noisy(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    true = rng.integers(0, 4, N)
    probs = rng.dirichlet(np.ones(4) * 0.4, N)
    probs[np.arange(N), true] += 1.2
    probs /= probs.sum(1, keepdims=True)
    given = true.copy()
    flip = rng.random(N) < 0.15
    given[flip] = (given[flip] + 1) % 4
    return given.astype(np.int64), probs


def _build(root: Path) -> dict[str, str]:
    reg = dsreg.init(registry=root / "reg")
    given, probs = _noisy(11)
    np.save(root / "labels.npy", given)
    np.save(root / "pyx.npy", probs)
    (root / "classes.txt").write_text("\n".join(CLASSES) + "\n")
    dsreg.add("toy", labels=root / "labels.npy", classes=root / "classes.txt", tag="original",
              registry=reg)  # fmt: skip
    # Votes (the label-errors release's JSON) on the rows the detector flags.
    detected = dsreg.detect("toy@original", root / "pyx.npy", tag="detected", view="corrected",
                            registry=reg)  # fmt: skip
    flagged = [i.row for i in detected.top]
    guessed = probs.argmax(1)
    agree = {"given": 1, "guessed": 4, "both": 0, "neither": 0}
    refuse = {"given": 4, "guessed": 0, "both": 1, "neither": 0}
    votes = [
        {"id": r, "given_original_label": int(given[r]), "our_guessed_label": int(guessed[r]),
         "mturk": agree if k % 2 else refuse}
        for k, r in enumerate(flagged) if guessed[r] != given[r]
    ]  # fmt: skip
    (root / "votes.json").write_text(json.dumps(votes))
    dsreg.import_votes("toy@original", root / "votes.json", tag="validated", view="corrected",
                       registry=reg)  # fmt: skip
    # ReaL-style label sets (by position) and CIFAR-10H-style rater counts.
    real = [[int(g)] if i % 5 else [int(g), (int(g) + 1) % 4] for i, g in enumerate(given)]
    (root / "real.json").write_text(json.dumps(real))
    dsreg.import_labels("toy@original", root / "real.json", format="real", tag="real",
                        view="multilabel", registry=reg)  # fmt: skip
    counts = np.zeros((N, 4), dtype=np.int64)
    counts[np.arange(N), given] = 40
    counts[np.arange(N), (given + 1) % 4] = np.random.default_rng(2).integers(0, 60, N)
    np.save(root / "counts.npy", counts)
    dsreg.import_labels("toy@original", root / "counts.npy", format="counts", tag="raters",
                        registry=reg)  # fmt: skip
    # Three recorded models, one of them int64 labels re-encoded when stored.
    rng = np.random.default_rng(5)
    models = {
        "strong": probs.argmax(1),
        "memorizer": given.copy(),
        "weak": np.where(rng.random(N) < 0.5, probs.argmax(1), rng.integers(0, 4, N)),
    }
    for name, arr in models.items():
        np.save(root / f"{name}.npy", arr.astype(np.int64))
        dsreg.evaluate("toy@original", [root / f"{name}.npy"], record=True, model=name,
                       registry=reg)  # fmt: skip
    dsreg.tag("toy@honeypot", "toy@detected", view="honeypot", registry=reg)
    dsreg.yank("toy@honeypot", reason="too few rows", registry=reg)
    # An image tree with two copies of one file, audited against itself.
    tree = root / "tree"
    for c in CLASSES[:2]:
        (tree / c).mkdir(parents=True)
        for i in range(4):
            (tree / c / f"{i}.bin").write_bytes(f"{c}-{i}".encode() * 40)
    (tree / "dog" / "copy.bin").write_bytes(b"cat-1" * 40)
    dsreg.add("pets", tree, tag="original", registry=reg)
    dsreg.audit_duplicates("pets@original", within=True, tag="audited", registry=reg)
    dsreg.add("old", labels=root / "labels.npy", classes=root / "classes.txt", tag="v1",
              registry=reg)  # fmt: skip
    dsreg.retire("old", successor="toy", reason="superseded", registry=reg)
    validated = dsreg.open("toy@validated", registry=reg).digest
    return {"validated": validated}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Published]:
    root = tmp_path_factory.mktemp("same")
    digests = _build(root)
    folder = root / "remote"
    dsreg.remote_add("origin", str(folder), default=True, registry=root / "reg")
    dsreg.publish(registry=root / "reg")
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        yield Published(root=root, reg=root / "reg", folder=folder, url=url, digests=digests)
    finally:
        server.shutdown()
        server.server_close()


Run = Callable[..., str]


def _unsourced(text: str, published: Published) -> str:
    """``text`` without the lines that name where it was read (the remote's URL or folder)."""
    for name in (published.url, str(published.folder)):
        text = text.replace(name, "<SOURCE>")
    return "".join(line for line in text.splitlines(True) if "<SOURCE>" not in line)


def _runner(published: Published, monkeypatch: pytest.MonkeyPatch, where: str) -> tuple[Run, Path]:
    """A ``dsreg`` run in-process: ``where`` is ``registry``, ``folder`` or ``http``."""
    home = published.root / f"run-{where}"
    home.mkdir(exist_ok=True)
    source = {"registry": None, "folder": str(published.folder), "http": published.url}[where]

    def run(*args: str, remote: bool = True) -> str:
        argv = [*args, "--remote", source] if source is not None and remote else list(args)
        out, err = io.StringIO(), io.StringIO()
        with monkeypatch.context() as m:
            m.chdir(home)
            for var in ("DSREG_REGISTRY", "DSREG_HOME"):
                m.delenv(var, raising=False)
            if where == "registry":
                m.setenv("DSREG_REGISTRY", str(published.reg))
            m.setenv("DSREG_CACHE", str(home / "cache"))
            m.setenv("COLUMNS", "200")
            with redirect_stdout(out), redirect_stderr(err):
                try:
                    main(argv)
                    code = 0
                except SystemExit as e:
                    code = int(e.code or 0)
        assert code == 0, f"dsreg {' '.join(argv)} ({where}): {err.getvalue()}"
        return _unsourced(out.getvalue(), published)

    return run, home


# Each read command and format, as typed (``--remote`` is added where the source is one).
COMMANDS = [
    ("ls",),
    ("ls", "--all", "--json"),
    ("log", "toy"),
    ("log", "toy", "--json"),
    ("show", "toy@validated"),
    ("show", "toy@validated", "--json"),
    ("show", "toy@real", "--json"),
    ("show", "pets@audited", "--json"),
    ("eval", "toy@validated", "strong.npy", "memorizer.npy", "weak.npy", "--flip-points"),
    ("eval", "toy@raters", "strong.npy", "memorizer.npy", "--json"),
    ("leaderboard", "toy"),
    ("leaderboard", "toy", "--json"),
    ("cite", "toy@validated"),
    ("cite", "toy@validated", "--format", "cff"),
    ("cite", "toy@validated", "--format", "text"),
    ("cite", "toy@validated", "--json"),
    ("cite", "toy@validated", "--model", "memorizer"),
    ("cite", "toy@validated", "--model", "strong", "--json"),
    ("diff", "toy@original", "toy@validated"),
    ("diff", "toy@detected", "toy@validated", "--json"),
    ("sql", 'SELECT label_name, count(*) AS n FROM "toy@validated" GROUP BY ALL ORDER BY 1'),
    ("sql", 'SELECT * FROM "toy@real" ORDER BY "row"', "--format", "json"),
]


@pytest.fixture(scope="module")
def outputs(published: Published, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    with pytest.MonkeyPatch.context() as mp:
        runs = {w: _runner(published, mp, w) for w in ("registry", "folder", "http")}
        for _, home in runs.values():
            for name in ("strong", "memorizer", "weak"):
                (home / f"{name}.npy").write_bytes((published.root / f"{name}.npy").read_bytes())
        return {w: [run(*c) for c in COMMANDS] for w, (run, _) in runs.items()}


@pytest.mark.parametrize("where", ["folder", "http"])
@pytest.mark.parametrize("i", range(len(COMMANDS)), ids=[" ".join(c)[:60] for c in COMMANDS])
def test_every_read_gives_the_registrys_answer(
    outputs: dict[str, list[str]], where: str, i: int
) -> None:
    assert outputs[where][i] == outputs["registry"][i]


def test_the_flip_and_the_label_card_are_in_what_is_compared(
    outputs: dict[str, list[str]],
) -> None:
    """The outputs compared hold the lines the record decides: the detector's line of the
    label card, the tags in the order they were first set, the flips."""
    show = outputs["registry"][COMMANDS.index(("show", "toy@validated"))]
    assert "detector:" in show
    board = json.loads(outputs["registry"][COMMANDS.index(("leaderboard", "toy", "--json"))])
    tags = [r["tag"] for r in board["revisions"]]
    assert tags == ["original", "detected", "validated", "real", "raters"]


@pytest.mark.parametrize("fmt", ["npy", "csv", "parquet", "jsonl", "datacite", "croissant"])
def test_export_writes_the_same_bytes(
    published: Published, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    got = {}
    for where in ("registry", "http"):
        run, home = _runner(published, monkeypatch, where)
        out = home / f"labels-{fmt}"
        run("export", "toy@real", "-o", str(out), "--format", fmt)
        files = sorted(p for p in out.rglob("*") if p.is_file()) if out.is_dir() else [out]
        got[where] = {p.relative_to(home).as_posix(): _file(p, published) for p in files}
    assert got["http"] == got["registry"]


def _file(path: Path, published: Published) -> object:
    """A file's bytes; a JSON document's data, where a value naming the source (a URL the
    document carries only for an ``http`` source) is left out and one naming it within a
    longer text has it replaced."""
    data = path.read_bytes()
    try:
        doc = json.loads(data)
    except ValueError:
        return data
    names = (published.url, str(published.folder))

    def strip(v: object) -> object:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if x not in names}
        if isinstance(v, list):
            return [strip(x) for x in v]
        if isinstance(v, str):
            for name in names:
                v = v.replace(name, "<SOURCE>")
        return v

    return strip(doc)


def test_the_python_api_reads_the_same(published: Published, monkeypatch: pytest.MonkeyPatch,
                                       tmp_path: Path) -> None:  # fmt: skip
    monkeypatch.delenv("DSREG_REGISTRY", raising=False)
    monkeypatch.setenv("DSREG_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    here = dsreg.open("toy@real", registry=published.reg)
    there = dsreg.open("toy@real", remote=published.url)
    assert there.digest == here.digest
    assert there.labels().equals(here.labels())
    mine = dsreg.leaderboard("toy", registry=published.reg).to_json()
    assert dsreg.leaderboard("toy", remote=published.url).to_json() == mine


def test_the_site_shows_what_the_commands_print(
    published: Published, outputs: dict[str, list[str]]
) -> None:
    """The published page of a tag: its label card is ``show``'s, its citation ``cite``'s
    (naming the site's own remote, the folder), and its dataset page lists the tags in the
    order the leaderboard scores them."""
    page = (published.folder / "site/tags/toy/validated.html").read_text(encoding="utf-8")
    show = outputs["registry"][COMMANDS.index(("show", "toy@validated"))]
    card = [line.strip() for line in show.splitlines() if line.strip().startswith("detector:")]
    assert card and all(line.split(" (overlay")[0] in page for line in card)
    bib = outputs["registry"][COMMANDS.index(("cite", "toy@validated"))]
    doi_free = [line for line in bib.splitlines() if "revision" in line]
    assert doi_free and all(_html(line) in page for line in doi_free)
    board = json.loads(outputs["registry"][COMMANDS.index(("leaderboard", "toy", "--json"))])
    index = (published.folder / "site/datasets/toy.html").read_text(encoding="utf-8")
    positions = [index.find(f">{r['tag']}<") for r in board["revisions"]]
    assert all(p >= 0 for p in positions) and positions == sorted(positions)


def _html(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def test_the_cited_predictions_are_the_files_given(published: Published) -> None:
    """``cite --model`` names the BLAKE3 of the file given to ``eval --record`` (an int64
    ``.npy``, stored as int32), and the stored copy beside it."""
    from blake3 import blake3

    c = dsreg.cite("toy@original", model="memorizer", registry=published.reg)
    given = "blake3:" + blake3((published.root / "memorizer.npy").read_bytes()).hexdigest()
    assert c.predictions == given
    assert c.stored is not None and c.stored != given
    assert "b3sum" in str(c)
    report = dsreg.evaluate("toy@original", [published.root / "memorizer.npy"],
                            registry=published.reg)  # fmt: skip
    assert report.models[0].predictions.digest == given


def test_a_pinned_parquet_view_reads_the_same_rows(published: Published) -> None:
    view = dsreg.export("toy@validated", to=str(published.root / "pins"),
                        registry=published.reg)  # fmt: skip
    rows = pq.read_table(published.root / "pins" / view.path)
    assert rows.num_rows == len(dsreg.open("toy@validated", registry=published.reg))

"""The whole of dsreg from Python, through ``dsreg.*`` alone: a session as a script would run
it (init, add a tree and a label file, tag, import votes, detect, checkout, verify, diff, cite,
push, clone, gc), where the registry is found, and what each error is to a Python user."""

from __future__ import annotations

import csv
import json
import os
import pickle
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

import dsreg

CLASSES = ["cat", "dog", "fox"]


def tiny_png(seed: int) -> bytes:
    """A valid 2x2 RGB PNG whose pixels depend on ``seed``."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + bytes((seed * 7 + i) % 256 for i in range(6)) for _ in range(2))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def image_folder(root: Path, per_class: int = 4) -> Path:
    for c, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            (root / name / f"img{i}.png").write_bytes(tiny_png(10 * c + i))
    return root


def label_errors_json(path: Path, records: list[tuple[int, int, int, dict[str, int]]]) -> Path:
    """The label-errors release's MTurk format: id (a row position here), given and guessed
    labels, and the raters' counts."""
    path.write_text(
        json.dumps(
            [
                {
                    "id": row,
                    "given_original_label": given,
                    "our_guessed_label": guessed,
                    "mturk": {"given": 0, "guessed": 0, "both": 0, "neither": 0, **counts},
                }
                for row, given, guessed, counts in records
            ]
        )
    )
    return path


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working folder of a script: tmp_path, no DSREG_* variables."""
    monkeypatch.chdir(tmp_path)
    for var in ("DSREG_REGISTRY", "DSREG_HOME"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def test_a_session_from_python_alone(here: Path) -> None:
    reg = dsreg.init(registry=here / "lab")
    assert isinstance(reg, dsreg.Registry)

    # An ImageFolder tree and a label file.
    tree = image_folder(here / "pets")
    pets = dsreg.add("pets", tree, tag="original", registry=reg)
    assert isinstance(pets, dsreg.AddResult)
    assert (pets.rows, pets.files, pets.classes) == (12, 12, tuple(CLASSES))
    again = dsreg.add("pets", tree, tag="original", registry=reg)
    assert again.revision == pets.revision and again.new_objects == 0

    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0], dtype=np.int64)
    np.save(here / "toy.npy", labels)
    (here / "toy.txt").write_text("a\nb\nc\n")
    toy = dsreg.add(
        "toy", labels=here / "toy.npy", classes=here / "toy.txt", tag="original", registry=reg
    )
    assert (toy.rows, toy.files, toy.classes) == (10, 0, ("a", "b", "c"))
    # Class names given as a list make the same snapshot as the file.
    same = dsreg.add("toy", labels=here / "toy.npy", classes=["a", "b", "c"], registry=reg)
    assert same.snapshot == toy.snapshot

    # Votes: row 1 is correctable (b -> c), row 2 is no error; tagged as a corrected revision.
    votes = label_errors_json(
        here / "votes.json", [(1, 1, 2, {"guessed": 4}), (2, 2, 0, {"given": 5})]
    )
    validated = dsreg.import_votes(
        "toy@original", votes, tag="validated", view="corrected", registry=reg
    )
    assert isinstance(validated, dsreg.CreatedOverlay) and validated.kind == "validated"
    assert (validated.summary["correctable"], validated.summary["non_error"]) == (1, 1)
    assert validated.tagged is not None and validated.tagged.view == "corrected"
    assert validated.tagged.revision == dsreg.open("toy@validated", registry=reg).digest

    # The detector on random probabilities; its overlay tagged cleaned, then corrected.
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(3), size=12)
    detected = dsreg.detect("pets@original", probs, tag="cleaned", top=3, registry=reg)
    assert isinstance(detected, dsreg.OverlayResult) and detected.kind == "detected"
    assert detected.tagged is not None and detected.tagged.view == "cleaned"
    flagged = detected.summary["rows"]
    assert len(detected.top) == min(3, flagged)
    scores = [i.score for i in detected.top]
    assert scores == sorted(scores)
    corrected = dsreg.tag(
        "pets@corrected",
        "pets@original",
        overlays=[detected.digest],
        view="corrected",
        registry=reg,
    )
    assert isinstance(corrected, dsreg.TagResult)
    assert corrected.overlays == (detected.digest,)
    cleaned = dsreg.open("pets@cleaned", registry=reg)
    assert len(cleaned) == 12 - flagged

    # Checkout: the labels a loader sees.
    out = dsreg.checkout("toy@validated", here / "co-toy", registry=reg)
    assert isinstance(out, dsreg.CheckoutResult) and out.revision == validated.tagged.revision
    with open(here / "co-toy" / "labels.csv", newline="") as f:
        served = {r["row"]: r["label_name"] for r in csv.DictReader(f)}
    assert served["1"] == "c" and served["2"] == "c" and served["0"] == "a"
    out = dsreg.checkout("pets@corrected", here / "co-pets", link="copy", registry=reg)
    assert out.files == 12
    for issue in dsreg.open("pets@corrected", registry=reg).labels().to_pylist():
        name = issue["example_id"].rpartition("/")[2]
        folder = here / "co-pets" / issue["label_name"]
        assert any(p.name.endswith(name) for p in folder.iterdir())

    # Verify, diff, cite, ls, show, log.
    checked = dsreg.verify(registry=reg)
    assert isinstance(checked, dsreg.VerifyResult) and checked.ok and checked.checked > 0
    assert dsreg.verify("pets@corrected", registry=reg).ok
    d = dsreg.diff("toy@original", "toy@validated", registry=reg)
    assert isinstance(d, dsreg.DiffResult) and (d.relabelled, d.only_a, d.only_b) == (1, 0, 0)
    c = dsreg.cite("pets@corrected", format="cff", authors=["A. Person"], registry=reg)
    assert isinstance(c, dsreg.Citation) and c.revision == corrected.revision
    assert corrected.revision in str(c) and "cff-version" in str(c)
    q = 'SELECT label_name, count(*) AS n FROM "toy@validated" GROUP BY ALL ORDER BY 1'
    assert dsreg.sql(q, registry=reg).to_pylist() == [
        {"label_name": "a", "n": 4},
        {"label_name": "b", "n": 2},
        {"label_name": "c", "n": 4},
    ]
    assert dsreg.sql(q, output=here / "counts.csv", registry=reg) == 3
    assert (here / "counts.csv").read_text().splitlines()[1:] == ['"a",4', '"b",2', '"c",4']
    tags = {(t.dataset, t.tag): t.revision for t in dsreg.ls(registry=reg)}
    assert tags[("pets", "corrected")] == corrected.revision and len(tags) == 5
    info = dsreg.show("pets@corrected", registry=reg)
    assert isinstance(info, dsreg.RevisionInfo)
    assert (info.revision, info.view, info.rows) == (corrected.revision, "corrected", 12)
    assert dsreg.show(detected.digest, registry=reg).type == "overlay"
    history = dsreg.log("pets", registry=reg)
    assert all(isinstance(e, dsreg.LogEntry) for e in history)
    assert {e.tag for e in history if e.event == "tag"} == {"original", "cleaned", "corrected"}
    assert [r.digest for r in dsreg.overlay_ls("pets", registry=reg)] == [detected.digest]
    shown = dsreg.overlay_show(detected.digest[:16], rows=2, registry=reg)
    assert shown.total == flagged and len(shown.corrections) == min(2, flagged)

    # Push to a folder remote, clone it, and get the same digests and bytes back.
    remote = here / "remote"
    dsreg.remote_add("origin", str(remote), default=True, registry=reg)
    assert [r.name for r in dsreg.remote_ls(registry=reg)] == ["origin"]
    pushed = dsreg.push(registry=reg)
    assert isinstance(pushed, dsreg.PushResult) and pushed.sent > 0
    assert dsreg.push(registry=reg).sent == 0
    cloned = dsreg.clone(str(remote), here / "clone")
    assert isinstance(cloned, dsreg.CloneResult)
    theirs = {(t.dataset, t.tag): t.revision for t in dsreg.ls(registry=cloned.registry)}
    assert theirs == tags
    mine = dsreg.open("pets@corrected", registry=reg)
    copy = dsreg.open("pets@corrected", registry=cloned.registry, remote="origin")
    assert copy.digest == mine.digest
    assert [e.read_bytes() for e in copy] == [e.read_bytes() for e in mine]
    assert dsreg.cite("toy@validated", registry=cloned.registry).revision == (
        validated.tagged.revision
    )
    pulled = dsreg.pull(registry=cloned.registry)
    assert isinstance(pulled, dsreg.PullResult)
    assert dsreg.verify(registry=cloned.registry).ok

    # gc: an untagged add is garbage; nothing a tag reaches goes.
    (tree / "cat" / "extra.png").write_bytes(tiny_png(99))
    untagged = dsreg.add("pets", tree, registry=reg)
    assert untagged.revision not in tags.values()
    dry = dsreg.gc(dry_run=True, registry=reg)
    assert isinstance(dry, dsreg.GcResult) and untagged.revision in dry.removed
    gone = dsreg.gc(registry=reg)
    assert untagged.revision in gone.removed
    assert dsreg.verify(registry=reg).ok
    for (ds, t), digest in tags.items():
        assert dsreg.open(f"{ds}@{t}", registry=reg).digest == digest
    assert [e.read_bytes() for e in dsreg.open("pets@corrected", registry=reg)] == [
        e.read_bytes() for e in copy
    ]


def test_dsreg_registry_is_honoured_by_open_and_by_the_command_line(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = dsreg.init(registry=here / "first")
    second = dsreg.init(registry=here / "second")
    np.save(here / "l.npy", np.array([0, 1, 1], dtype=np.int64))
    a = dsreg.add("x", labels=here / "l.npy", classes=["n", "y"], tag="v1", registry=first)
    np.save(here / "l.npy", np.array([1, 1, 0], dtype=np.int64))
    b = dsreg.add("x", labels=here / "l.npy", classes=["n", "y"], tag="v1", registry=second)
    # A .dsreg here, which $DSREG_REGISTRY outranks.
    dsreg.init()
    assert (here / ".dsreg" / "config.toml").is_file()
    with pytest.raises(dsreg.RevisionNotFoundError):
        dsreg.open("x@v1")
    monkeypatch.setenv("DSREG_REGISTRY", str(here / "second"))
    assert dsreg.open("x@v1").digest == b.revision
    assert dsreg.find_registry().root == second.root
    # An explicit registry= still wins.
    assert dsreg.open("x@v1", registry=first.root).digest == a.revision
    # The command line finds the same one.
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSREG_")}
    env["DSREG_REGISTRY"] = str(here / "second")
    proc = subprocess.run(
        [sys.executable, "-m", "dsreg", "show", "x@v1", "--json"],
        cwd=here,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["revision"] == b.revision
    # init honours it too, as `dsreg init` always did.
    monkeypatch.setenv("DSREG_REGISTRY", str(here / "third"))
    assert dsreg.init().root == here / "third"


ERRORS_AS_BUILTINS: list[tuple[type[dsreg.DsregError], tuple[type[Exception], ...]]] = [
    (dsreg.InvalidInputError, (ValueError,)),
    (dsreg.InvalidNameError, (ValueError,)),
    (dsreg.InvalidSpecError, (ValueError,)),
    (dsreg.InputPathError, (ValueError, FileNotFoundError, OSError)),
    (dsreg.DatasetFormatError, (ValueError,)),
    (dsreg.ProbabilitiesError, (ValueError,)),
    (dsreg.VotesError, (ValueError,)),
    (dsreg.RelabelingError, (ValueError,)),
    (dsreg.PredictionsError, (ValueError,)),
    (dsreg.QueryError, (ValueError,)),
    (dsreg.ReviewConflictError, (ValueError,)),
    (dsreg.NotFoundError, (LookupError,)),
    (dsreg.RegistryNotFoundError, (LookupError, FileNotFoundError, OSError)),
    (dsreg.RevisionNotFoundError, (LookupError,)),
    (dsreg.ObjectNotFoundError, (LookupError,)),
    (dsreg.AmbiguousDigestError, (LookupError,)),
    (dsreg.TagExistsError, (ValueError,)),
    (dsreg.IntegrityError, (OSError,)),
    (dsreg.CorruptObjectError, (OSError,)),
    (dsreg.ManifestError, (OSError,)),
    (dsreg.ConfigError, (ValueError,)),
    (dsreg.RemoteError, (OSError,)),
    (dsreg.StorageError, (OSError,)),
    (dsreg.MissingExtraError, (ImportError,)),
]


@pytest.mark.parametrize(("cls", "builtins"), ERRORS_AS_BUILTINS)
def test_each_error_is_catchable_as_its_builtin(
    cls: type[dsreg.DsregError], builtins: tuple[type[Exception], ...]
) -> None:
    for builtin in builtins:
        with pytest.raises(builtin) as caught:
            raise cls("what was wrong, and what to do")
        assert isinstance(caught.value, dsreg.DsregError)
        # The message is the message: no "[Errno None]" from OSError.
        assert str(caught.value) == "what was wrong, and what to do"
    again = pickle.loads(pickle.dumps(cls("m")))
    assert type(again) is cls and str(again) == "m"


def test_every_error_class_is_in_the_table() -> None:
    named = {
        n for n in dsreg.__all__ if n.endswith("Error") and issubclass(getattr(dsreg, n), Exception)
    }
    assert named == {c.__name__ for c, _ in ERRORS_AS_BUILTINS} | {"DsregError"}


def test_errors_carry_their_data(here: Path) -> None:
    reg = dsreg.init(registry=here / "reg")
    with pytest.raises(FileNotFoundError) as nowhere:
        dsreg.open("x@v1", registry=here / "nowhere")
    assert isinstance(nowhere.value, dsreg.RegistryNotFoundError)
    assert nowhere.value.path == str(here / "nowhere")

    np.save(here / "l.npy", np.array([0, 1, 1], dtype=np.int64))
    a = dsreg.add("x", labels=here / "l.npy", classes=["n", "y"], tag="v1", registry=reg)
    with pytest.raises(LookupError) as missing:
        dsreg.open("x@v9", registry=reg)
    assert isinstance(missing.value, dsreg.RevisionNotFoundError)
    assert (missing.value.dataset, missing.value.ref) == ("x", "v9")

    np.save(here / "l.npy", np.array([1, 1, 1], dtype=np.int64))
    b = dsreg.add("x", labels=here / "l.npy", classes=["n", "y"], tag="v2", registry=reg)
    with pytest.raises(ValueError) as exists:
        dsreg.tag("x@v1", "x@v2", registry=reg)
    e = exists.value
    assert isinstance(e, dsreg.TagExistsError)
    assert (e.dataset, e.tag, e.existing, e.new) == ("x", "v1", a.revision, b.revision)
    with pytest.raises(dsreg.TagExistsError) as exists:
        dsreg.add("x", labels=here / "l.npy", classes=["n", "y"], tag="v1", registry=reg)
    assert (exists.value.existing, exists.value.new) == (a.revision, b.revision)

    with pytest.raises(ValueError) as bad:
        dsreg.add("Bad Name", labels=here / "l.npy", registry=reg)
    assert isinstance(bad.value, dsreg.InvalidNameError) and bad.value.name == "Bad Name"

    # A flipped bit in the examples table: the object's digest, path and actual hash.
    snap = dsreg.show(b.snapshot, registry=reg)
    assert isinstance(snap, dsreg.RevisionInfo)
    h = snap.examples.partition(":")[2]
    stored = reg.root / "files" / "blake3" / h[:2] / h[2:]
    os.chmod(stored, 0o644)
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 1
    stored.write_bytes(bytes(data))
    with pytest.raises(OSError) as corrupt:
        dsreg.open("x@v2", registry=reg).labels()
    c = corrupt.value
    assert isinstance(c, dsreg.CorruptObjectError)
    assert c.digest == snap.examples and c.path == str(stored)
    assert c.actual is not None and c.actual.startswith("blake3:") and c.actual != c.digest
    assert not dsreg.verify(registry=reg).ok


def test_import_dsreg_stays_light() -> None:
    code = (
        "import sys, dsreg\n"
        "dsreg.add, dsreg.tag, dsreg.push, dsreg.AddResult, dsreg.TagResult, dsreg.errors\n"
        "heavy = {'numpy', 'pyarrow', 'duckdb', 'dvc', 'pandas', 'typer', 'rich'}\n"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert proc.stdout.strip() == "[]"


def test_every_public_name_resolves_and_every_command_function_is_public() -> None:
    """``dsreg.X`` works for every name ``dsreg`` exports (and ``dir`` lists), and every function
    of ``dsreg.api`` (one per command) is one of them: the lazy map cannot drift from the lists
    type checkers read."""
    import dsreg.api

    for name in dsreg.__all__:
        assert getattr(dsreg, name) is not None, name
    assert set(dsreg.__all__) <= set(dir(dsreg))
    assert set(dsreg.api.__all__) <= set(dsreg.__all__)
    for name in dsreg.api.__all__:
        assert getattr(dsreg, name) is getattr(dsreg.api, name), name


def test_no_exported_name_is_also_a_submodule_of_dsreg_api() -> None:
    """``from dsreg.api import registry`` imports the submodule without reading the export list;
    an exported name that were also a submodule's would then depend on import order."""
    import pkgutil

    import dsreg.api

    submodules = {m.name for m in pkgutil.iter_modules(dsreg.api.__path__)}
    assert submodules, "dsreg.api has submodules"
    assert not submodules & set(dsreg.api.__all__)


def test_the_command_line_reaches_the_library_without_reading_its_export_list() -> None:
    """The CLI's ``from dsreg.api import registry as registry_api`` (the form call-following
    tools read) imports the submodule directly, and ``dsreg.tag`` still resolves after it."""
    code = (
        "import dsreg.api as api, dsreg._util.lazy as lazy\n"
        "read = []\n"
        "real = lazy.reexports\n"
        "lazy.reexports = lambda source: read.append(1) or real(source)\n"
        "from dsreg.api import registry as registry_api\n"
        "print(len(read), registry_api.__name__)\n"
        "import dsreg\n"
        "print(dsreg.tag is registry_api.tag, len(read))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert proc.stdout.split() == ["0", "dsreg.api.registry", "True", "1"]

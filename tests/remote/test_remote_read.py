"""Reading a remote on a machine that never ran ``dsreg init`` (a fresh HOME): ``ls``, ``show``,
``sql``, ``open`` and ``checkout`` with ``--remote URL`` against a folder remote, an S3 remote
(moto on loopback) and an HTTP remote (a static file server on loopback serving a pushed
registry, directory listings off); objects go to the per-user cache, verified, and queries fetch
no payload. A corrupted remote object is refused; a push to http(s) is refused."""

from __future__ import annotations

import functools
import http.server
import io
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dsreg
from dsreg import AddResult, CorruptObjectError, Registry, RemoteError
from dsreg.ops.maintenance import reachable
from dsreg.registry.reader import LocalReader
from dsreg.registry.results import read_result

PIN = ".dsreg.json"


# -- a static web server on loopback -----------------------------------------------------------
@dataclass
class Served:
    """A folder served over HTTP: its URL and the paths requested (GET), in order."""

    url: str
    root: Path
    requested: list[str] = field(default_factory=list)


class _StaticHandler(http.server.SimpleHTTPRequestHandler):
    """Files only, as a static host serves a bucket: no directory listing."""

    served: Served

    def list_directory(self, path: str | os.PathLike[str]) -> None:
        self.send_error(404, "No listing")
        return None

    def do_GET(self) -> None:
        self.served.requested.append(self.path)
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def static_server(tmp_path: Path) -> Iterator[Callable[[Path], Served]]:
    """``static_server(folder)`` -> the folder served over http on 127.0.0.1."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def serve(root: Path) -> Served:
        served = Served(url="", root=root)
        handler = type("Handler", (_StaticHandler,), {"served": served})
        srv = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(handler, directory=str(root))
        )
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        served.url = f"http://127.0.0.1:{srv.server_address[1]}/reg"
        return served

    yield serve
    for srv in servers:
        srv.shutdown()
        srv.server_close()


# -- a machine with no registry ----------------------------------------------------------------
@dataclass
class Fresh:
    home: Path
    work: Path

    @property
    def cache(self) -> Path:
        return self.home / ".cache" / "dsreg"

    def run(self, *args: str) -> tuple[int, str, str]:
        """``dsreg ARGS`` in-process, in the work folder: (exit code, stdout, stderr)."""
        from dsreg.cli import main

        out, err = io.StringIO(), io.StringIO()
        code = 0
        argv = sys.argv
        sys.argv = ["dsreg", *args]
        try:
            with redirect_stdout(out), redirect_stderr(err):
                main(list(args))
        except SystemExit as e:
            code = int(e.code or 0)
        finally:
            sys.argv = argv
        return code, out.getvalue(), err.getvalue()

    def cached(self) -> set[str]:
        """Digests of the objects the cache registry holds."""
        base = self.cache / "files" / "blake3"
        if not base.is_dir():
            return set()
        return {f"blake3:{s.name}{p.name}" for s in base.iterdir() for p in s.iterdir()}


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fresh:
    """A HOME that never ran ``dsreg init``, and an empty working folder."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    for var in ("DSREG_HOME", "DSREG_REGISTRY", "DSREG_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    return Fresh(home=home, work=work)


@dataclass
class Published:
    reg: Registry
    tree: Path
    added: AddResult
    folder: Path  # the folder remote pushed to
    payloads: set[str]  # digests of the payload blobs
    tables: set[str]  # manifests and tables


@pytest.fixture
def published(
    make_registry: Callable[..., Registry],
    make_imagefolder: Callable[..., Path],
    add_tree: Callable[..., AddResult],
    tmp_path: Path,
) -> Published:
    """pets@v1 (15 images, 3 classes) pushed to a folder remote."""
    reg = make_registry("origin")
    tree = make_imagefolder("pets", classes=["cat", "dog", "fox"], per_class=5)
    added = add_tree(reg, "pets", tree, tag="v1")
    folder = tmp_path / "remote"
    dsreg.push(remote=str(folder), registry=reg)
    everything, problems = reachable(reg, [added.revision])
    assert not problems
    payloads = set(dsreg.open("pets@v1", registry=reg).labels().column("blob").to_pylist())
    return Published(
        reg=reg,
        tree=tree,
        added=added,
        folder=folder,
        payloads=payloads,
        tables=everything - payloads,
    )


def files_of(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.name != PIN
    }


def _object(folder: Path, digest: str) -> Path:
    h = digest.removeprefix("blake3:")
    return folder / "files" / "blake3" / h[:2] / h[2:]


def _damage(path: Path) -> None:
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


# -- the three kinds of remote -------------------------------------------------------------------
@pytest.fixture(params=["folder", "http", "s3"])
def remote_url(
    request: pytest.FixtureRequest,
    published: Published,
    static_server: Callable[[Path], Served],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    """The published registry as a reader reaches it: a folder path, an http:// URL served by
    a static server, or an s3:// URL (moto; its endpoint from $AWS_ENDPOINT_URL, as any AWS
    tool takes it, since a fresh machine has no remote configured)."""
    if request.param == "folder":
        return str(published.folder)
    if request.param == "http":
        site = tmp_path / "site"
        site.mkdir()
        (site / "reg").symlink_to(published.folder)
        return static_server(site).url
    endpoint = request.getfixturevalue("s3_endpoint")
    url = f"s3://lab/{tmp_path.name}/dsreg"
    dsreg.remote_add("s3", url, options={"endpointurl": endpoint}, registry=published.reg)
    dsreg.push(remote="s3", registry=published.reg)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    return url


def test_a_fresh_machine_lists_shows_queries_opens_and_checks_out_a_remote(
    published: Published, remote_url: str, fresh: Fresh
) -> None:
    rev = published.added.revision
    code, out, err = fresh.run("ls", "--remote", remote_url)
    assert code == 0, err
    assert out.split("\n")[1].split() == ["pets", "v1", rev.removeprefix("blake3:")[:12]]

    code, out, err = fresh.run("show", "pets@v1", "--remote", remote_url, "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert (shown["revision"], shown["rows"], shown["tag"]) == (rev, 15, "v1")
    assert not fresh.cached() & published.payloads  # show fetched no payload

    query = 'SELECT label_name, count(*) AS n FROM "pets@v1" GROUP BY ALL ORDER BY 1'
    code, out, err = fresh.run("sql", query, "--remote", remote_url, "--format", "csv")
    assert code == 0, err
    assert out.splitlines() == ['"label_name","n"', '"cat",5', '"dog",5', '"fox",5']
    assert fresh.cached() == published.tables  # manifests and tables, never a payload

    ds = dsreg.open("pets@v1", remote=remote_url)
    assert ds.digest == rev and ds.tag == "v1" and len(ds) == 15
    assert ds[0].read_bytes() == (published.tree / ds[0].example_id).read_bytes()
    assert fresh.cached() == published.tables | published.payloads

    code, out, err = fresh.run("checkout", "pets@v1", "out", "--remote", remote_url)
    assert code == 0, err
    assert out.strip() == rev
    assert files_of(fresh.work / "out") == files_of(published.tree)
    # Nothing but the checkout in the working folder; no registry made anywhere but the cache.
    assert sorted(p.name for p in fresh.work.iterdir()) == ["out"]
    assert sorted(p.name for p in fresh.home.iterdir()) == [".cache"]
    assert dsreg.verify(registry=fresh.cache).ok


def test_a_bare_digest_and_a_prefix_resolve_on_the_remote(
    published: Published, fresh: Fresh
) -> None:
    rev = published.added.revision
    url = str(published.folder)
    assert dsreg.open(rev, remote=url).digest == rev
    assert dsreg.show(f"pets@{rev.removeprefix('blake3:')[:10]}", remote=url).revision == rev
    with pytest.raises(dsreg.RevisionNotFoundError, match=r"no tag 'pets@v9'.*v1"):
        dsreg.show("pets@v9", remote=url)


def test_the_cache_is_where_dsreg_cache_or_xdg_says(
    published: Published, fresh: Fresh, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    dsreg.show("pets@v1", remote=str(published.folder))
    assert (tmp_path / "xdg" / "dsreg" / "config.toml").is_file()
    monkeypatch.setenv("DSREG_CACHE", str(tmp_path / "mine"))
    dsreg.show("pets@v1", remote=str(published.folder))
    assert (tmp_path / "mine" / "config.toml").is_file()
    assert not fresh.cache.exists()


def test_a_remote_name_without_a_registry_is_a_clear_error(fresh: Fresh) -> None:
    code, _out, err = fresh.run("ls", "--remote", "origin")
    assert code == 1
    assert "Error: no registry here, so remote 'origin' names nothing" in err


@pytest.mark.parametrize("kind", ["folder", "http"])
def test_a_corrupt_remote_object_is_refused_and_never_served(
    published: Published,
    fresh: Fresh,
    static_server: Callable[[Path], Served],
    tmp_path: Path,
    kind: str,
) -> None:
    url = str(published.folder)
    if kind == "http":
        site = tmp_path / "site"
        site.mkdir()
        (site / "reg").symlink_to(published.folder)
        url = static_server(site).url
    blob = sorted(published.payloads)[0]
    _damage(_object(published.folder, blob))

    # Queries need no payload: they still answer.
    assert dsreg.sql('SELECT count(*) AS n FROM "pets@v1"', remote=url).column("n")[0].as_py()
    with pytest.raises(CorruptObjectError, match=blob):
        dsreg.open("pets@v1", remote=url)
    code, _out, err = fresh.run("checkout", "pets@v1", "out", "--remote", url)
    assert code == 1 and "corrupt" in err and blob in err
    assert not (fresh.work / "out").exists()
    assert blob not in fresh.cached()

    examples = dsreg.show("pets@v1", remote=url).examples
    _damage(_object(published.folder, examples))
    os.environ["DSREG_CACHE"] = str(tmp_path / "other-cache")
    try:
        code, _out, err = fresh.run("sql", 'SELECT count(*) FROM "pets@v1"', "--remote", url)
    finally:
        del os.environ["DSREG_CACHE"]
    assert code == 1 and "corrupt" in err and examples in err


def test_an_http_remote_is_read_only_and_clones_and_pulls(
    published: Published,
    static_server: Callable[[Path], Served],
    make_registry: Callable[..., Registry],
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "reg").symlink_to(published.folder)
    served = static_server(site)
    with pytest.raises(RemoteError, match=r"read-only.*push to the folder or bucket"):
        dsreg.push(remote=served.url, registry=published.reg)

    cloned = dsreg.clone(served.url, tmp_path / "clone")
    assert [(r.dataset, r.tag, r.revision) for r in cloned.refs] == [
        ("pets", "v1", published.added.revision)
    ]
    pulled = dsreg.pull(registry=tmp_path / "clone")
    assert pulled.fetched == len(published.payloads)
    dsreg.checkout("pets@v1", tmp_path / "out", registry=tmp_path / "clone")
    assert files_of(tmp_path / "out") == files_of(published.tree)
    assert not any(p.endswith("/") for p in served.requested)  # nothing was listed

    # A new tag pushed to the folder is seen through the index push rewrote.
    dsreg.tag("pets@v2", "pets@v1", registry=published.reg)
    dsreg.push(remote=str(published.folder), registry=published.reg)
    assert [(t.tag) for t in dsreg.ls(remote=served.url, registry=tmp_path / "clone")] == [
        "v1",
        "v2",
    ]


def test_sql_over_a_remote_fetches_no_payload_over_http(
    published: Published, static_server: Callable[[Path], Served], fresh: Fresh, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "reg").symlink_to(published.folder)
    served = static_server(site)
    con = dsreg.connect(remote=served.url)
    rows = con.sql("SELECT count(*) FROM \"pets@v1\" WHERE label_name = 'dog'").fetchall()
    assert rows == [(5,)]
    fetched = {p.rsplit("/", 2)[-2] + p.rsplit("/", 1)[-1] for p in served.requested}
    assert not {d.removeprefix("blake3:") for d in published.payloads} & fetched


def test_a_corrupt_object_on_s3_is_refused_and_never_served(
    published: Published,
    fresh: Fresh,
    s3_endpoint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import boto3

    prefix = f"{tmp_path.name}/corrupt"
    url = f"s3://lab/{prefix}"
    dsreg.remote_add("s3", url, options={"endpointurl": s3_endpoint}, registry=published.reg)
    dsreg.push(remote="s3", registry=published.reg)
    blob = sorted(published.payloads)[0]
    h = blob.removeprefix("blake3:")
    key = f"{prefix}/files/blake3/{h[:2]}/{h[2:]}"
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    data = bytearray(s3.get_object(Bucket="lab", Key=key)["Body"].read())
    data[0] ^= 0x01
    s3.put_object(Bucket="lab", Key=key, Body=bytes(data))
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)

    code, _out, err = fresh.run("checkout", "pets@v1", "out", "--remote", url)
    assert code == 1 and "corrupt" in err and blob in err
    assert not (fresh.work / "out").exists()
    assert blob not in fresh.cached()
    with pytest.raises(CorruptObjectError, match=blob):
        dsreg.open("pets@v1", remote=url)


def test_a_missing_object_on_an_http_remote_is_named(
    published: Published, static_server: Callable[[Path], Served], fresh: Fresh, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "reg").symlink_to(published.folder)
    url = static_server(site).url
    gone = sorted(published.payloads)[-1]
    _object(published.folder, gone).unlink()
    with pytest.raises(dsreg.ObjectNotFoundError, match=r"lacks 1 objects \(" + gone[7:19]):
        dsreg.open("pets@v1", remote=url)
    # Every other payload was fetched, verified and kept: a second try fetches none of them.
    assert fresh.cached() == published.tables | (published.payloads - {gone})


# -- recorded results read from a remote ----------------------------------------------------------
def _served_folder(folder: Path, static_server: Callable[[Path], Served], tmp_path: Path) -> str:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "reg").symlink_to(folder)
    return static_server(site).url


def _board(out: str) -> dict[str, dict[str, dict[str, object]]]:
    """``--json`` of a leaderboard: ``{revision tag: {model: {view: score}}}``."""
    return {r["tag"]: r["scores"] for r in json.loads(out)["revisions"]}


@pytest.mark.parametrize("kind", ["http", "clone"])
def test_a_model_recorded_before_a_relabeling_is_rescored_from_a_remote(
    toy: Any,
    fresh: Fresh,
    static_server: Callable[[Path], Served],
    tmp_path: Path,
    kind: str,
) -> None:
    folder = tmp_path / "published"
    dsreg.push(remote=str(folder), registry=toy.reg)
    toy.relabel("corrected")  # tagged after the models were recorded and pushed
    dsreg.push(remote=str(folder), registry=toy.reg)
    if kind == "http":
        where = ["--remote", _served_folder(folder, static_server, tmp_path)]
    else:
        code, _out, err = fresh.run("clone", str(folder), "mirror")
        assert code == 0, err
        where = ["--registry", str(fresh.work / "mirror")]

    code, out, err = fresh.run("leaderboard", "toy", *where, "--resamples", "200")
    assert code == 0, err
    assert out.splitlines()[1].split()[:2] == ["revision", "original"]
    assert out.splitlines()[2].split()[:2] == ["revision", "corrected"]
    # The corrected view's table: each model with its interval and rank interval, on both
    # revisions; "fixed" leads on the relabeling.
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("corrected:"))
    fixed = next(line for line in lines[at:] if line.startswith("fixed"))
    assert fixed.split() == [
        *("fixed", "50.0", "(44.4-55.6)", "rank", "3", "[3-3]"),
        *("100.0", "(98.7-100.0)", "rank", "1", "[1-1]"),
    ]

    code, out, err = fresh.run("leaderboard", "toy", *where, "--json", "--resamples", "200")
    assert code == 0, err
    board = _board(out)
    assert list(board) == ["original", "corrected"]
    n = len(toy.labels)
    after = board["corrected"]
    # Re-scored on the relabeling: "fixed" predicted the corrected labels all along.
    assert after["fixed"]["corrected"]["correct"] == n
    assert after["given"]["corrected"]["correct"] == n // 2
    assert board["original"]["given"]["original"]["correct"] == n
    lo, hi = after["given"]["corrected"]["interval"]
    assert lo < 0.5 < hi and after["fixed"]["corrected"]["rank"] == 1
    local = dsreg.leaderboard("toy", resamples=200, registry=toy.reg)
    assert json.loads(out) == json.loads(local.to_json())  # the same board as the origin's

    code, out, err = fresh.run("cite", "toy@corrected", "--model", "fixed", *where, "--json")
    assert code == 0, err
    cited = json.loads(out)
    assert cited["result"] == toy.recorded["fixed"] and cited["meta"] == {"run": "fixed"}
    assert cited["revision"] == LocalReader(toy.reg).revision("toy@corrected").digest
    if kind == "http":
        # No registry was made: what was read is in the per-user cache, no payload among it.
        assert sorted(p.name for p in fresh.work.iterdir()) == []
        assert dsreg.verify(registry=fresh.cache).ok


def test_eval_scores_given_predictions_against_a_remote_revision(
    toy: Any, fresh: Fresh, static_server: Callable[[Path], Served], tmp_path: Path
) -> None:
    folder = tmp_path / "published"
    toy.relabel("corrected")
    dsreg.push(remote=str(folder), registry=toy.reg)
    url = _served_folder(folder, static_server, tmp_path)
    np.save(fresh.work / "fixed.npy", toy.preds["fixed"])
    code, out, err = fresh.run(
        "eval", "toy@corrected", "fixed.npy", "--remote", url, "--views", "corrected", "--json"
    )
    assert code == 0, err
    want = dsreg.evaluate(
        "toy@corrected", {"fixed": toy.preds["fixed"]}, views=["corrected"], registry=toy.reg
    )
    got, ref = json.loads(out), json.loads(want.to_json())
    assert got["revision"] == ref["revision"] and got["views"] == {"corrected": {"rows": 300}}
    assert [m["scores"] for m in got["models"]] == [m["scores"] for m in ref["models"]]
    assert got["models"][0]["scores"]["corrected"]["correct"] == {"top1": 300}
    code, _out, err = fresh.run("eval", "toy@corrected", "fixed.npy", "--remote", url, "--record")
    assert code == 1 and err.startswith("Error: --record keeps predictions in a registry")
    assert len(err.strip().splitlines()) == 1


def test_diff_of_two_remote_revisions_equals_the_local_diff(
    toy: Any, fresh: Fresh, static_server: Callable[[Path], Served], tmp_path: Path
) -> None:
    """``dsreg diff A B --remote URL`` with no registry: the same result as in the registry
    that pushed them, and no payload is fetched."""
    folder = tmp_path / "published"
    toy.relabel("corrected")
    dsreg.push(remote=str(folder), registry=toy.reg)
    url = _served_folder(folder, static_server, tmp_path)
    code, out, err = fresh.run("diff", "toy@original", "toy@corrected", "--remote", url, "--json")
    assert code == 0, err
    want = dsreg.diff("toy@original", "toy@corrected", registry=toy.reg)
    assert json.loads(out) == json.loads(json.dumps(want.to_dict()))
    assert want.relabelled > 0
    assert sorted(p.name for p in fresh.work.iterdir()) == []
    code, _out, err = fresh.run("diff", "toy@original", "toy@nosuch", "--remote", url)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "nosuch" in err


@pytest.mark.parametrize("kind", ["folder", "http"])
def test_an_unknown_model_or_a_damaged_result_on_a_remote_is_one_line(
    toy: Any,
    fresh: Fresh,
    static_server: Callable[[Path], Served],
    tmp_path: Path,
    kind: str,
) -> None:
    folder = tmp_path / "published"
    dsreg.push(remote=str(folder), registry=toy.reg)
    url = str(folder) if kind == "folder" else _served_folder(folder, static_server, tmp_path)
    code, _out, err = fresh.run("cite", "toy@original", "--model", "nosuch", "--remote", url)
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "no model 'nosuch'" in err and "fixed, given, near" in err

    # The predictions of "fixed" damaged on the remote: refused, named, never served.
    predictions = read_result(toy.reg, toy.recorded["fixed"]).predictions
    _damage(_object(folder, predictions))
    for args in (
        ("leaderboard", "toy", "--remote", url),
        ("cite", "toy@original", "--model", "fixed", "--remote", url),
    ):
        code, out, err = fresh.run(*args)
        assert code == 1 and not out and len(err.strip().splitlines()) == 1, err
        assert err.startswith("Error: model ref toy/fixed on remote") and predictions in err
    assert predictions not in fresh.cached()

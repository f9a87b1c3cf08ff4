"""Listings of a remote's tags are bounded: ``ls --remote`` reads at most ``--max-tags`` tag
files (``$DSREG_MAX_TAGS``, default 10,000), concurrently, with progress, and says when it
stopped short; resolving ``dataset@tag`` reads that one tag file, and a dataset's tags are read
without reading the others' (docs/remotes.md, "Reading a remote")."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import dsreg
from dsreg import Registry
from dsreg.remote import store
from dsreg.remote.filesystem import FolderFS

DEFAULT_CAP = 10_000


@dataclass
class Published:
    reg: Registry
    remote: Path
    revision: str


@pytest.fixture
def published(
    make_registry: Callable[..., Registry],
    make_imagefolder: Callable[..., Path],
    tmp_path: Path,
) -> Published:
    """pets@v1 (6 files) pushed to a folder remote."""
    reg = make_registry("origin")
    tree = make_imagefolder("pets", classes=2, per_class=3)
    res = dsreg.add("pets", tree, tag="v1", registry=reg)
    dsreg.push(remote=str(tmp_path / "remote"), registry=reg)
    return Published(reg=reg, remote=tmp_path / "remote", revision=res.revision)


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A machine with no registry (its cache under tmp_path); the working folder."""
    for var in ("DSREG_HOME", "DSREG_REGISTRY", "XDG_CACHE_HOME", "DSREG_MAX_TAGS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSREG_CACHE", str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def _tag_many(folder: Path, dataset: str, n: int, revision: str) -> None:
    """``n`` more tags of ``dataset`` on a folder remote, all naming ``revision``."""
    refs = folder / "refs" / dataset
    refs.mkdir(parents=True, exist_ok=True)
    line = (revision + "\n").encode("ascii")
    for i in range(n):
        (refs / f"t{i:06d}").write_bytes(line)


@pytest.fixture
def tag_reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every tag file a folder remote is asked for (its path below ``refs/``, and the reading
    thread), as the remote's file system is asked."""
    reads: list[tuple[str, int]] = []
    original = FolderFS.cat_file

    def cat_file(path: str, start: int | None = None, end: int | None = None) -> bytes:
        if "/refs/" in path:
            reads.append((path.split("/refs/", 1)[1], threading.get_ident()))
        return original(path, start, end)

    monkeypatch.setattr(FolderFS, "cat_file", staticmethod(cat_file))
    return reads


# -- a folder remote with more tags than the default cap -----------------------------------------


def test_ls_of_a_remote_reads_at_most_the_default_cap_concurrently_with_progress(
    published: Published,
    machine: Path,
    tag_reads: list[tuple[str, int]],
    cli: Callable[..., Any],
) -> None:
    extra = DEFAULT_CAP + 6
    _tag_many(published.remote, "many", extra, published.revision)
    named = extra + 1  # and pets@v1
    seen: list[tuple[str, int, int]] = []
    tags = dsreg.ls(remote=str(published.remote), progress=lambda *a: seen.append(a))
    assert (len(tags), tags.named, tags.omitted, tags.max_tags) == (
        DEFAULT_CAP,
        named,
        named - DEFAULT_CAP,
        DEFAULT_CAP,
    )
    # The first by dataset and tag, each naming what its file holds.
    assert [t.tag for t in tags[:2]] == ["t000000", "t000001"]
    assert {t.revision for t in tags} == {published.revision}
    assert len(tag_reads) == DEFAULT_CAP  # one read per tag listed, no more
    assert len({thread for _path, thread in tag_reads}) > 1  # read concurrently
    assert seen[-1] == ("reading tags", DEFAULT_CAP, DEFAULT_CAP)

    tag_reads.clear()
    res = cli("ls", "--remote", str(published.remote))
    assert res.exit_code == 0, res.stderr
    assert len(res.stdout.splitlines()) == 1 + DEFAULT_CAP
    assert res.stderr.strip() == (
        f"Listed the first 10,000 of the {named:,} tags remote {published.remote} names (by "
        "dataset and tag); --max-tags N or $DSREG_MAX_TAGS raises the cap (0: no cap)."
    )
    assert len(tag_reads) == DEFAULT_CAP

    tag_reads.clear()
    res = cli("ls", "--remote", str(published.remote), "--max-tags", "0", "--json")
    assert res.exit_code == 0 and res.stderr == ""
    assert len(json.loads(res.stdout)) == named and len(tag_reads) == named


def test_resolving_one_tag_reads_one_tag_file(
    published: Published,
    machine: Path,
    tag_reads: list[tuple[str, int]],
    make_imagefolder: Callable[..., Path],
    tmp_path: Path,
) -> None:
    """However many tags the remote holds: ``dataset@tag`` reads its own file, an unknown tag
    reads nothing more (the error names the dataset's tags from the listing), a prefix reads
    the tags of its dataset only, and so does ``pull DATASET``."""
    url = str(published.remote)
    _tag_many(published.remote, "pets", 2000, published.revision)
    cars = dsreg.add("cars", make_imagefolder("cars", seed=1), tag="v1", registry=published.reg)
    dsreg.tag("cars@v2", "cars@v1", registry=published.reg)
    dsreg.push(["cars"], remote=url, registry=published.reg)
    tag_reads.clear()

    assert dsreg.show("pets@v1", remote=url).revision == published.revision
    assert [p for p, _ in tag_reads] == ["pets/v1"]

    tag_reads.clear()
    assert dsreg.show("pets@t001234", remote=url).revision == published.revision
    assert [p for p, _ in tag_reads] == ["pets/t001234"]

    tag_reads.clear()
    with pytest.raises(dsreg.RevisionNotFoundError) as refused:
        dsreg.show("pets@nosuch", remote=url)
    assert [p for p, _ in tag_reads] == ["pets/nosuch"]
    # The dataset's tags as the listing names them, the first twenty and a count.
    assert "(its tags of 'pets': t000000, t000001," in str(refused.value)
    assert ", t000019, and 1,981 more)" in str(refused.value)

    tag_reads.clear()
    prefix = cars.revision.removeprefix("blake3:")[:10]
    assert dsreg.show(f"cars@{prefix}", remote=url).revision == cars.revision
    # A tag by that name first (a tag wins over a prefix), then the revisions of cars' tags.
    assert sorted(p for p, _ in tag_reads) == [f"cars/{prefix}", "cars/v1", "cars/v2"]

    tag_reads.clear()
    dsreg.init(registry=tmp_path / "mine")
    dsreg.pull(["cars"], remote=url, registry=tmp_path / "mine")
    assert sorted(p for p, _ in tag_reads) == ["cars/v1", "cars/v2"]


def test_a_bad_max_tags_is_refused(
    published: Published, machine: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = str(published.remote)
    res = cli("ls", "--remote", url, "--max-tags", "-1")
    assert res.exit_code == 1 and "-1" in res.stderr
    res = cli("ls", "--max-tags", "5")
    assert res.exit_code == 1
    assert res.stderr.strip() == "Error: --max-tags caps a remote's listing: give --remote too"
    monkeypatch.setenv("DSREG_MAX_TAGS", "lots")
    res = cli("ls", "--remote", url)
    assert res.exit_code == 1
    assert res.stderr.strip() == (
        "Error: $DSREG_MAX_TAGS is 'lots': give a number of tags, at least 0 (0 reads every tag)"
    )
    with pytest.raises(dsreg.InvalidInputError, match="max_tags is -3"):
        dsreg.ls(remote=url, max_tags=-3)


# -- an http remote whose info/refs names 300,000 tags --------------------------------------------


@dataclass
class Site:
    """A static site serving a pushed registry whose ``info/refs`` names ``TAGS`` tags of
    dataset ``pets`` (each tag file made up on request, naming pets@v1's revision)."""

    url: str
    tag_requests: list[str] = field(default_factory=list)
    index_requests: int = 0
    in_flight: int = 0
    most_in_flight: int = 0


TAGS = 300_000


@pytest.fixture
def site(published: Published) -> Iterator[Site]:
    index = "".join(f"pets/t{i:06d}\n" for i in range(TAGS)).encode("ascii")
    value = (published.revision + "\n").encode("ascii")
    lock = threading.Lock()
    served = Site(url="")
    root = published.remote

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            path = self.path.removeprefix("/reg/")
            body: bytes | None = None
            if path == "info/refs":
                served.index_requests += 1
                body = index
            elif path.startswith("refs/pets/t"):
                with lock:
                    served.tag_requests.append(path)
                    served.in_flight += 1
                    served.most_in_flight = max(served.most_in_flight, served.in_flight)
                time.sleep(0.002)
                with lock:
                    served.in_flight -= 1
                body = value
            elif path.startswith("files/") and (root / path).is_file():
                body = (root / path).read_bytes()
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_HEAD(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    served.url = f"http://127.0.0.1:{srv.server_address[1]}/reg"
    try:
        yield served
    finally:
        srv.shutdown()
        srv.server_close()


def test_ls_of_an_index_of_300000_tags_reads_only_the_cap(
    site: Site, machine: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    res = cli("ls", "--remote", site.url, "--max-tags", "120")
    assert res.exit_code == 0, res.stderr
    rows = res.stdout.splitlines()[1:]
    assert [r.split()[1] for r in rows] == [f"t{i:06d}" for i in range(120)]
    assert res.stderr.strip() == (
        f"Listed the first 120 of the 300,000 tags remote {site.url} names (by dataset and "
        "tag); --max-tags N or $DSREG_MAX_TAGS raises the cap (0: no cap)."
    )
    assert len(site.tag_requests) == 120 and site.index_requests == 1
    assert site.most_in_flight > 1  # the tag files were requested concurrently

    site.tag_requests.clear()
    monkeypatch.setenv("DSREG_MAX_TAGS", "30")
    res = cli("ls", "--remote", site.url, "--json")
    assert res.exit_code == 0, res.stderr
    assert len(json.loads(res.stdout)) == 30 and len(site.tag_requests) == 30
    assert "Listed the first 30 of the 300,000 tags" in res.stderr


def test_resolving_one_tag_of_300000_reads_its_file_alone(
    site: Site, published: Published, machine: Path
) -> None:
    shown = dsreg.show("pets@t123456", remote=site.url)
    assert (shown.revision, shown.tag) == (published.revision, "t123456")
    assert site.tag_requests == ["refs/pets/t123456"] and site.index_requests == 0


def test_an_index_larger_than_a_push_writes_ends_the_read_with_one_line_naming_it(
    site: Site, machine: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The site's index names 300,000 tags (3.9 MB); the bound is lowered below it.
    monkeypatch.setattr(store, "INDEX_BYTES", 1 << 20)
    res = cli("ls", "--remote", site.url)
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert f"{site.url}/info/refs" in res.stderr and "larger than 1 MiB" in res.stderr
    assert site.tag_requests == []

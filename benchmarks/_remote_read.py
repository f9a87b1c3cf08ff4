"""Reading a remote over HTTP on a fresh machine: ``bench_remotes.py --suite read``.

One static web server on loopback (a subprocess: ``http.server``, HTTP/1.1 keep-alive, no
directory listings, counting the bytes of every file it serves) publishes both a pushed dsreg
registry and a DVC remote of the same ImageFolder tree of real PNG images (32x32 RGB noise, the
size of CIFAR's images: the smallest payloads, so the hardest case for the bytes target).

- ``dsreg sql`` of a count over the revision, fresh cache and HOME: the bytes the server sent,
  against the revision's bytes (every object it reaches). Target: under 5%.
- the first ``dsreg.open(DIGEST, remote=URL)`` (fresh cache: every payload fetched and
  verified) against ``dvc get REPO data`` of the same files from a DVC project whose default
  remote is the same server (fresh DVC site cache, no local DVC cache). Target: dsreg within 2x
  of DVC. ``dsreg checkout DIGEST DIR --remote URL`` (files written, as ``dvc get`` writes them)
  is shown beside it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import (
    DSREG,
    DVC,
    PYTHON,
    TOOL_ENV,
    Checks,
    Measurement,
    Series,
    Target,
    fresh_dir,
    measure_tool,
)
from _common import run_tool as _run

SQL_BYTES = Target("dsreg sql count, fresh machine: share of the revision's bytes", "<", 5, "%")
OPEN = Target("first open: dsreg open / dvc get", "<=", 2)

_SERVER = r"""
import functools, http.server, json, os, sys, threading
stats = {"bytes": 0, "requests": 0}
lock = threading.Lock()

class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real static server
    disable_nagle_algorithm = True  # TCP_NODELAY, as nginx's tcp_nodelay (small files stall else)

    def list_directory(self, path):
        self.send_error(404, "No listing")
        return None

    def _json(self, data):
        body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/__stats":
            with lock:
                return self._json(dict(stats))
        if self.path == "/__reset":
            with lock:
                stats.update(bytes=0, requests=0)
            return self._json({})
        f = self.send_head()
        if f:
            try:
                n = os.fstat(f.fileno()).st_size
                self.copyfile(f, self.wfile)
            finally:
                f.close()
            with lock:
                stats["bytes"] += n
                stats["requests"] += 1

    def log_message(self, *args):
        pass

srv = http.server.ThreadingHTTPServer(
    ("127.0.0.1", 0), functools.partial(Handler, directory=sys.argv[1])
)
srv.daemon_threads = True
srv.handle_error = lambda request, address: None  # a client that hangs up is not news
print(srv.server_address[1], flush=True)
srv.serve_forever()
"""

# The first open: every payload fetched, verified, into a fresh cache.
_OPEN = """
import sys, dsreg
ds = dsreg.open(sys.argv[1], remote=sys.argv[2])
assert len(ds) == int(sys.argv[3]), len(ds)
"""


class Server:
    """The static server subprocess and its byte counter."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, "-c", _SERVER, str(root)], stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"

    def _get(self, path: str) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            data: dict[str, Any] = json.loads(r.read())
            return data

    def reset(self) -> None:
        self._get("/__reset")

    def stats(self) -> dict[str, Any]:
        return self._get("/__stats")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def make_pngs(root: Path, *, files: int, classes: int, seed: int = 0) -> Path:
    """An ImageFolder tree of ``files`` 32x32 RGB PNGs of noise (reused when its marker
    matches)."""
    import numpy as np
    from PIL import Image

    params = {"files": files, "classes": classes, "seed": seed, "kind": "png32"}
    marker = root.with_name(root.name + ".params.json")
    if root.is_dir() and marker.is_file() and json.loads(marker.read_text()) == params:
        return root
    if root.exists():
        shutil.rmtree(root)
    rng = np.random.default_rng(seed)
    for c in range(classes):
        (root / f"n{c:08d}").mkdir(parents=True)
    for i in range(files):
        pixels = rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(root / f"n{i % classes:08d}" / f"img_{i:08d}.png")
    marker.write_text(json.dumps(params))
    return root


def _dvc_project(proj: Path, tree: Path, remote: Path, url: str, site: Path) -> None:
    """A git repository with DVC tracking ``data`` (the tree), pushed to ``remote`` (a folder
    the server publishes) and with ``url`` (that folder over HTTP) as its committed default
    remote; its local cache removed, so ``dvc get`` must fetch from the server."""
    fresh_dir(proj)
    _run(["git", "init", "-q"], proj)
    _run(["git", "config", "user.email", "bench@example.org"], proj)
    _run(["git", "config", "user.name", "bench"], proj)
    _run([*DVC, "init", "-q"], proj)
    for key, value in (("core.analytics", "false"), ("core.check_update", "false")):
        _run([*DVC, "config", key, value], proj)
    _run([*DVC, "remote", "add", "-d", "web", url], proj)
    _run([*DVC, "remote", "add", "folder", str(remote)], proj)
    shutil.copytree(tree, proj / "data")
    env = {**os.environ, **TOOL_ENV, "DVC_SITE_CACHE_DIR": str(site)}
    for cmd in (
        [*DVC, "add", "-q", "data"],
        [*DVC, "push", "-q", "-r", "folder"],
        ["git", "add", "-A"],
        ["git", "commit", "-qm", "data"],
    ):
        subprocess.run(cmd, cwd=proj, check=True, capture_output=True, env=env)
    shutil.rmtree(proj / ".dvc" / "cache")
    shutil.rmtree(proj / "data")


def _fresh_env(runs: Path, tag: str) -> dict[str, str]:
    """A machine that never ran dsreg or DVC: its own HOME, dsreg cache and DVC site cache."""
    home = fresh_dir(runs / f"home-{tag}")
    return {
        "HOME": str(home),
        "DSREG_CACHE": str(home / ".cache" / "dsreg"),
        "DVC_SITE_CACHE_DIR": str(home / "dvc-site"),
        "DSREG_REGISTRY": "",
        "DSREG_HOME": "",
    }


def _timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> Measurement:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return measure_tool(cmd, cwd, sample_memory=False)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run(
    work: Path, *, files: int, classes: int, reps: int, say: Callable[[str], None], checks: Checks
) -> dict[str, Any]:
    """Set up, measure, print the report and check the targets; the results."""
    tree = make_pngs(work / "pngs", files=files, classes=classes)
    size = sum(p.stat().st_size for p in tree.rglob("*.png"))
    site = fresh_dir(work / "site")
    reg = work / "dsreg-read-reg"
    if not (reg / "refs" / "pngs" / "v1").is_file():
        fresh_dir(reg)
        _run([*DSREG, "init", "--registry", str(reg)], work)
        _run([*DSREG, "add", "pngs", str(tree), "--tag", "v1", "--registry", str(reg)], work)
    revision = json.loads(_run([*DSREG, "show", "pngs@v1", "--json", "--registry", str(reg)], work))
    digest = revision["revision"]
    _run([*DSREG, "push", "-r", str(site / "dsreg"), "--registry", str(reg)], work)
    revision_bytes = sum(
        os.stat(os.path.join(d, f)).st_size
        for d, _dirs, names in os.walk(site / "dsreg" / "files")
        for f in names
    )
    server = Server(site)
    try:
        runs = fresh_dir(work / "read-runs")
        say(f"read: {files} PNGs ({size / 2**20:.0f} MiB) served at {server.url}; DVC project")
        proj = runs / "dvc-proj"
        _dvc_project(proj, tree, site / "dvc", f"{server.url}/dvc", runs / "dvc-setup-site")
        dsreg_url = f"{server.url}/dsreg"
        empty = fresh_dir(runs / "empty")

        # 1. a count over the revision, on a fresh machine: bytes the server sent.
        server.reset()
        query = 'SELECT count(*) AS n FROM "pngs@v1"'
        env = _fresh_env(runs, "sql")
        sql = _timed([*DSREG, "sql", query, "--remote", dsreg_url, "-f", "csv"], empty, env)
        sql_stats = server.stats()

        s = {k: Series(name=k) for k in ("dsreg_open", "dsreg_checkout", "dvc_get")}
        served: dict[str, list[int]] = {k: [] for k in s}

        def one(name: str, rep: int) -> None:
            env = _fresh_env(runs, f"{name}-{rep}")
            out = runs / f"out-{name}-{rep}"
            if name == "dsreg_open":
                cmd = [PYTHON, "-c", _OPEN, digest, dsreg_url, str(files)]
            elif name == "dsreg_checkout":
                cmd = [*DSREG, "checkout", digest, str(out), "--remote", dsreg_url]
            else:
                cmd = [*DVC, "get", str(proj), "data", "-o", str(out)]
            server.reset()
            s[name].runs.append(_timed(cmd, empty, env))
            served[name].append(int(server.stats()["bytes"]))
            if name != "dsreg_open":
                n = sum(len(f) for _d, _s, f in os.walk(out)) - (name == "dsreg_checkout")
                if n != files:
                    raise SystemExit(f"{name} wrote {n} files, expected {files}")

        for rep in range(reps):
            order = ["dsreg_open", "dvc_get", "dsreg_checkout"]
            if rep % 2:
                order.reverse()
            for name in order:
                say(f"  repetition {rep + 1}/{reps}: {name}")
                one(name, rep)
    finally:
        server.stop()

    share = sql_stats["bytes"] / revision_bytes
    ratio = s["dsreg_open"].seconds / s["dvc_get"].seconds
    print(
        f"remote reading over HTTP (static server on loopback): {files} PNG images "
        f"({size / 2**20:.1f} MiB of payloads), revision {revision_bytes / 2**20:.1f} MiB, "
        f"{reps} reps, {os.cpu_count()} cpus (medians)"
    )
    for k, v in s.items():
        mib = sorted(served[k])[len(served[k]) // 2] / 2**20
        print(f"  {k:<16} {v.seconds:8.2f} s   served {mib:8.1f} MiB")
    checks.check(
        SQL_BYTES,
        100 * share,
        f"{sql_stats['bytes'] / 2**20:.2f} MiB in {sql_stats['requests']} requests "
        f"[{sql.seconds:.2f} s]",
    )
    checks.check(OPEN, ratio)
    print(
        f"  shown: dsreg checkout --remote / dvc get = "
        f"{s['dsreg_checkout'].seconds / s['dvc_get'].seconds:.2f}x"
    )
    result = {
        "files": files,
        "payload_bytes": size,
        "revision_bytes": revision_bytes,
        "sql": {"bytes": sql_stats["bytes"], "requests": sql_stats["requests"], "share": share},
        "sql_seconds": sql.seconds,
        "series": {k: v.to_dict() for k, v in s.items()},
        "served": served,
        "open_over_dvc_get": ratio,
    }
    return result


if __name__ == "__main__":
    sys.exit("run bench_remotes.py --suite read")

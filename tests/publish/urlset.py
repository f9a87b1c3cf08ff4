"""A registry published by URL, as a reader meets it: ``siteset``'s synthetic set and its retired
predecessor, an ImageFolder tree with payloads and a licence recorded at ``add``, and a
label-only set whose relabeling re-ranks three recorded models; published with ``--url`` (the
loopback address of python's ``http.server`` serving the folder), two authors and a licence
for the datasets that record none, and again without ``--url`` to a second folder.

In ``rerank`` the relabeling corrects half of the 400 rows: ``memorizer`` predicts the given
labels (first on the original, last on the corrected), ``oracle`` the corrected ones (last,
then first), and ``middle`` half of each on the corrected rows: second on both, though it
changes order with both others, significantly (the rank that does not move, which keeps no
star)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
from siteset import CIFAR, SYNTH, build_site_set

import dsreg
from dsreg import Registry
from tests.conftest import GOLDEN_TREE, golden_bytes

TREE = "photos"
RERANK = "rerank"
AUTHORS = ("Doe, Jane", "Example Lab")
LICENSE = "CC-BY-4.0"  # given at publish: the datasets that record none
TREE_LICENSE = "MIT"  # recorded at add


@dataclass
class UrlSite:
    reg: Registry
    url: str  # ends in "/"
    www: Path  # the folder served at url, published with --url
    relative: Path  # the same registry published without --url
    predictions: dict[str, Path]  # rerank's models' predictions (.npy), by model

    def specs(self) -> list[str]:
        """Every tag published, yanked ones too, as ``dataset@tag``."""
        return [f"{t.dataset}@{t.tag}" for t in dsreg.ls(registry=self.reg, all=True)]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serving(folder: Path) -> Iterator[str]:
    """python's ``http.server`` (no byte ranges) serving ``folder`` on a free loopback port,
    on a thread of this process; its URL, ending in ``/``."""
    folder.mkdir(parents=True, exist_ok=True)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(_Quiet, directory=str(folder))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _add_tree(reg: Registry, root: Path) -> None:
    tree = root / "tree"
    for rel, size in GOLDEN_TREE.items():
        p = tree / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(golden_bytes(rel, size))
    dsreg.add(TREE, tree, tag="original", license=TREE_LICENSE.lower(), registry=reg)
    counts = np.zeros((len(GOLDEN_TREE), 3), dtype=np.int64)
    counts[:, 0] = 5  # the raters call every example a cat
    np.save(root / "tree-counts.npy", counts)
    dsreg.import_labels(f"{TREE}@original", root / "tree-counts.npy", format="counts",
                        tag="rated", view="corrected", registry=reg)  # fmt: skip


def _add_rerank(reg: Registry, root: Path) -> dict[str, Path]:
    n, k = 400, 10
    rng = np.random.default_rng(11)
    given = rng.integers(0, k, n)
    true = given.copy()
    fixed = np.arange(n) % 2 == 1  # every other row is corrected
    true[fixed] = (given[fixed] + 1 + rng.integers(0, k - 1, int(fixed.sum()))) % k
    np.save(root / "rerank.npy", given)
    (root / "rerank-classes.txt").write_text("\n".join(CIFAR) + "\n")
    dsreg.add(RERANK, labels=root / "rerank.npy", classes=root / "rerank-classes.txt",
              tag="original", registry=reg)  # fmt: skip
    counts = np.zeros((n, k), dtype=np.int64)
    counts[np.arange(n), true] = 5
    np.save(root / "rerank-counts.npy", counts)
    dsreg.import_labels(f"{RERANK}@original", root / "rerank-counts.npy", format="counts",
                        tag="relabeled", view="corrected", registry=reg)  # fmt: skip
    middle = np.where(fixed & (np.cumsum(fixed) % 2 == 0), true, given)
    files = {}
    for model, preds in (("memorizer", given), ("middle", middle), ("oracle", true)):
        files[model] = root / f"{model}.npy"
        np.save(files[model], preds)
        dsreg.record(f"{RERANK}@original", preds, model=model, registry=reg)
    return files


def build_url_site(root: Path, url: str, www: Path) -> UrlSite:
    """The registry under ``root``, published to ``www`` (served at ``url``) with ``--url``
    and to ``root / "relative"`` without."""
    ss = build_site_set(root / "src")
    _add_tree(ss.reg, root)
    predictions = _add_rerank(ss.reg, root)
    dsreg.export(f"{SYNTH}@cleaned-v1", to=str(www), registry=ss.reg)
    dsreg.publish(str(www), url=url, authors=list(AUTHORS), license=LICENSE.lower(),
                  registry=ss.reg)  # fmt: skip
    relative = root / "relative"
    dsreg.publish(str(relative), authors=list(AUTHORS), license=LICENSE, registry=ss.reg)
    return UrlSite(reg=ss.reg, url=url, www=www, relative=relative, predictions=predictions)

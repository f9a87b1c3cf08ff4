"""A small image test set with flagged rows: what every review test starts from. (A module of
its own, not conftest: ``from conftest import`` picks whichever conftest was imported first
when several test folders run together.)"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

import dsreg

XSS_CLASS = "<script>alert(1)</script>"
CLASSES = ["cat", "dog", XSS_CLASS]
FOLDERS = ["cat", "dog", "other"]  # the class folders of ImageFolder-like ids


@dataclass(frozen=True)
class ReviewSet:
    registry: Path
    spec: str  # the detected revision: its last overlay is the queue
    overlay: str
    flagged: list[int]  # rows flagged, worst score first


def _png(rng: np.random.Generator, color: tuple[int, int, int]) -> bytes:
    from PIL import Image

    pixels = np.clip(
        rng.normal(0, 25, (32, 32, 3)) + np.array(color, dtype=np.float64), 0, 255
    ).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buf, format="PNG")
    return buf.getvalue()


def build_review_set(
    root: Path,
    *,
    rows: int = 30,
    flagged: int = 8,
    payloads: str = "png",
    seed: int = 0,
    ids: str = "files",
    metadata: bool = True,
    tied: int = 0,
) -> ReviewSet:
    """``rows`` examples of three classes (one named like a script tag), ``flagged`` of them
    given a label their predicted probabilities contradict; detected and tagged ``@detected``.
    ``payloads``: ``png`` (Pillow images), ``text`` or ``none`` (label-only). ``ids``: ``files``
    (``ex00007.png``), or, label-only, ``plain`` (``ex00007``) or ``folders`` (ImageFolder-like,
    ``<class folder>/ex00007.png``). ``metadata``: a ``note`` column.
    ``tied``: the first that many flagged rows get the same probabilities, so one score."""
    rng = np.random.default_rng(seed)
    labels = np.arange(rows) % 3
    colors = [(200, 60, 60), (60, 160, 60), (60, 60, 200)]
    src = root / "src"
    files = src / "files"
    files.mkdir(parents=True)
    lines = ["example_id,label" + (",note" if metadata else "")]
    for i in range(rows):
        name = f"ex{i:05d}" + (".png" if payloads == "png" else ".txt")
        if ids == "plain":
            name = f"ex{i:05d}"
        elif ids == "folders":
            name = f"{FOLDERS[labels[i]]}/ex{i:05d}.png"
        if payloads == "png":
            (files / name).write_bytes(_png(rng, colors[labels[i]]))
        elif payloads == "text":
            (files / name).write_text(f"text of example {i} <b>not bold</b>\n")
        lines.append(f"{name},{labels[i]}" + (f",note {i}" if metadata else ""))
    (src / "examples.csv").write_text("\n".join(lines) + "\n")
    reg = root / "reg"
    dsreg.init(registry=reg)
    dsreg.add(
        "pets",
        table=src / "examples.csv",
        files=files if payloads != "none" else None,
        classes=CLASSES,
        tag="v1",
        registry=reg,
    )
    probs = np.full((rows, 3), 0.05)
    probs[np.arange(rows), labels] = 0.9
    bad = rng.choice(rows, flagged, replace=False)
    for rank, row in enumerate(bad):
        wrong = (labels[row] + 1) % 3
        probs[row] = 0.02
        probs[row, wrong] = 0.96 - max(rank - max(tied - 1, 0), 0) * 0.01
    probs /= probs.sum(axis=1, keepdims=True)
    res = dsreg.detect("pets@v1", probs, tag="detected", view="original", registry=reg)
    assert res.summary["rows"] == flagged
    return ReviewSet(
        registry=reg, spec="pets@detected", overlay=res.digest, flagged=[int(r) for r in bad]
    )


class Reviewed(Protocol):
    """What a review is started from: a revision and its registry."""

    @property
    def spec(self) -> str: ...

    @property
    def registry(self) -> Path: ...


class Server:
    """``dsreg review`` in its own process, as a user runs it: the dsreg these tests import,
    its stderr kept in a file (``stderr()``). ``review_set`` is a label review's set, or with
    ``audit`` an audited set (``pairset.PairSet``), whose findings are reviewed as pairs."""

    def __init__(
        self, review_set: ReviewSet | Reviewed, votes_per_item: int = 5, *, audit: bool = False
    ) -> None:
        self.args = [
            sys.executable,
            "-m",
            "dsreg",
            "review",
            review_set.spec,
            "--registry",
            str(review_set.registry),
            "--votes-per-item",
            str(votes_per_item),
            "--json",
            *(["--audit"] if audit else []),
        ]
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.token = ""
        self.port = 0
        self.started: dict[str, object] = {}
        self.log = review_set.registry.parent / f"server-{id(self)}.stderr"

    def start(self) -> str:
        if self.url:  # again on the same port: the page's origin, and its localStorage, stay
            self.args += ["--port", str(self.port)]
        env = {**os.environ, "PYTHONPATH": str(Path(dsreg.__file__).resolve().parents[1])}
        with self.log.open("a", encoding="utf-8") as err:
            self.proc = subprocess.Popen(
                self.args, stdout=subprocess.PIPE, stderr=err, text=True, env=env
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, self.stderr()
        self.started = json.loads(line)
        self.url = str(self.started["url"])
        self.port = int(self.url.split(":")[2].split("/")[0])
        self.token = self.url.split("token=")[1].split("&")[0]
        return self.url

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stderr(self) -> str:
        """Everything the server wrote on stderr so far, over all its starts."""
        return self.log.read_text(encoding="utf-8")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._close()

    def _close(self) -> None:
        assert self.proc is not None
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self._close()

"""An audited image test set: what the pair review tests start from. A training set and a test
set whose first rows are copies of training rows (one re-encoded with a little noise, so its
distance is not 0) and one row repeating another test row; audited against the training set
with ``--within`` and tagged ``@audited`` (view ``decontaminated``)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from starlette.testclient import TestClient

import dsreg

CLASSES = ["cat", "dog"]
BASE = "http://127.0.0.1"


@dataclass(frozen=True)
class PairSet:
    registry: Path
    spec: str  # the audited revision: its last overlay is the audit's
    audit: str  # the audit overlay's digest
    rows: int  # rows of the test set
    findings: dict[int, dict[str, object]]  # row -> {verdict, match, tier, distance}
    corpus: Path | None = None  # the training files' folder, when the audit read it unregistered


def _image(rng: np.random.Generator) -> np.ndarray:
    """A 64 x 64 picture of smooth blobs (pHash needs structure, not noise)."""
    coarse = rng.uniform(0, 255, (4, 4, 3))
    return np.kron(coarse, np.ones((16, 16, 1)))


def _png(pixels: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB").save(buf, format="PNG")
    return buf.getvalue()


def _add(reg: Path, name: str, folder: Path, images: list[bytes]) -> None:
    files = folder / "files"
    files.mkdir(parents=True)
    lines = ["example_id,label"]
    for i, data in enumerate(images):
        (files / f"{name}{i:03d}.png").write_bytes(data)
        lines.append(f"{name}{i:03d}.png,{i % 2}")
    (folder / "examples.csv").write_text("\n".join(lines) + "\n")
    dsreg.add(name, table=folder / "examples.csv", files=files, classes=CLASSES, tag="v1",
              registry=reg)  # fmt: skip


def build_pair_set(root: Path, *, rows: int = 10, seed: int = 1, corpus: bool = False) -> PairSet:
    """Test rows 0 and 1 copy training rows 3 and 5 (row 1 with noise), row ``rows - 2``
    copies training row 1 brightened by 10%, and row ``rows - 1`` repeats test row
    ``rows - 2``; the other rows are new pictures. ``corpus``: the audit reads the training
    files as a folder (``--against DIR``), not as ``train@v1``."""
    rng = np.random.default_rng(seed)
    train = [_image(rng) for _ in range(8)]
    test = [_image(rng) for _ in range(rows)]
    test[0] = train[3]
    test[1] = train[5] + rng.normal(0, 6, train[5].shape)
    test[rows - 2] = train[1] * 1.1
    test[rows - 1] = test[rows - 2]
    reg = root / "reg"
    dsreg.init(registry=reg)
    _add(reg, "train", root / "train", [_png(p) for p in train])
    _add(reg, "test", root / "test", [_png(p) for p in test])
    folder = root / "train" / "files"
    res = dsreg.audit_duplicates(
        "test@v1",
        against=[str(folder) if corpus else "train@v1"],
        within=True,
        tag="audited",
        registry=reg,
    )
    assert res.digest is not None
    findings = {
        f.row: {
            "verdict": f.verdict,
            "match": f.matches[0]["example_id"],
            "tier": f.matches[0]["tier"],
            "distance": f.matches[0]["distance"],
        }
        for f in res.findings
    }
    return PairSet(registry=reg, spec="test@audited", audit=res.digest, rows=rows,
                   findings=findings, corpus=folder if corpus else None)  # fmt: skip


def login(server: dsreg.ReviewServer, link: str) -> TestClient:
    """A client of ``server``'s page that opened ``link`` (its token traded for the cookie) and
    sends the token header with each request, as the page does."""
    client = TestClient(server.asgi(), base_url=BASE, raise_server_exceptions=False)
    token = link.split("token=")[1].split("&")[0]
    assert client.get(f"/?token={token}", follow_redirects=False).status_code == 303
    client.headers["X-Dsreg-Token"] = token
    return client


def answer(client: TestClient, given: str | None, *, reviewer: str | None = None) -> dict[str, Any]:
    """The client's next item answered ``given``, or skipped when None (as ``reviewer`` on a
    link whose raters name themselves); the item as the page got it."""
    named = {} if reviewer is None else {"reviewer": reviewer}
    item = client.post("/api/next", json=named).json()["item"]
    path = "/api/skip" if given is None else "/api/vote"
    got = client.post(path, json={**named, "row": item["row"], "answer": given,
                                  "ticket": item["ticket"]})  # fmt: skip
    assert got.status_code == 200, got.json()
    return dict(item)


class Review(NamedTuple):
    """A review to start: a label review (``review_set``) or an audit's pair review
    (``pair_set``, ``audit``), and an answer that fits its items."""

    spec: str
    registry: Path
    audit: bool
    fits: str

    @property
    def flags(self) -> list[str]:
        """The command line's flags naming this review's queue."""
        return ["--audit"] if self.audit else []


class Untouched(NamedTuple):
    """A review with a vote to store, which a refusal leaves as it is, and a digest prefix that
    names two objects of its registry."""

    review: Review
    prefix: str


# A test run on a label review and on a pair review alike (the ``review`` fixture).
BOTH_REVIEWS = pytest.mark.parametrize("review", ["label", "pair"], indirect=True)

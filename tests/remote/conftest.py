"""Fixtures of the remote tests: an S3 server (moto on loopback, through dvc-s3), and a dataset
with recorded results."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsreg
from dsreg import Registry
from dsreg.formats.corrections import corrections_table
from dsreg.overlays.write import write_overlay


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        import boto3
        from moto.server import ThreadedMotoServer
    except ImportError as e:
        pytest.skip(f"moto[server] or boto3 is not installed ({e}): S3 tests need them")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    mp = pytest.MonkeyPatch()
    for key in (
        "AWS_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
    ):
        mp.delenv(key, raising=False)
    mp.setenv("AWS_ACCESS_KEY_ID", "testing")
    mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
    empty = tmp_path_factory.mktemp("aws") / "config"
    empty.write_text("")
    mp.setenv("AWS_CONFIG_FILE", str(empty))
    mp.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    try:
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
    except Exception as e:
        mp.undo()
        pytest.skip(f"moto's S3 server could not start on loopback: {e}")
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="lab")
    try:
        yield endpoint
    finally:
        server.stop()
        mp.undo()


# -- a dataset with recorded results --------------------------------------------------------------
@dataclass
class Toy:
    """``toy@original`` (a label-only set of ``n`` rows, 3 classes) with models recorded on it:
    ``given`` predicts the given labels, ``fixed`` the labels ``relabel`` corrects (rows
    ``0..n/2-1`` moved to the next class), ``near`` the given labels but the corrected ones on
    three rows."""

    reg: Registry
    labels: np.ndarray
    snapshot: str
    preds: dict[str, np.ndarray]
    recorded: dict[str, str]  # model -> record digest

    def relabel(self, tag: str = "corrected") -> str:
        """Tag ``toy@<tag>``: an overlay correcting the first half of the rows to the next
        class, served in the corrected view; the revision's digest."""
        rows = np.arange(len(self.labels) // 2)
        table = corrections_table(
            rows=rows,
            example_ids=[f"img{r:04d}" for r in rows],
            given_label=self.labels[rows],
            suggested_label=(self.labels[rows] + 1) % 3,
            verdict=["correctable"] * len(rows),
        )
        producer = {"name": "test", "version": "1", "params": {}, "inputs": {}}
        d = write_overlay(
            self.reg, base=self.snapshot, kind="manual", table=table, producer=producer
        )
        return dsreg.tag(
            f"toy@{tag}", "toy@original", overlays=[d], view="corrected", registry=self.reg
        ).revision


@pytest.fixture
def toy(make_registry: Callable[..., Registry], tmp_path: Path) -> Toy:
    reg = make_registry("origin")
    n = 300
    labels = np.random.default_rng(7).integers(0, 3, n).astype(np.int32)
    table = tmp_path / "toy.parquet"
    ids = [f"img{i:04d}" for i in range(n)]
    pq.write_table(pa.table({"example_id": ids, "label": pa.array(labels)}), table)
    snap = dsreg.add(
        "toy", table=table, classes=["ant", "bee", "cat"], tag="original", registry=reg
    ).snapshot
    fixed = labels.copy()
    fixed[: n // 2] = (labels[: n // 2] + 1) % 3
    near = labels.copy()
    near[:3] = fixed[:3]
    preds = {"given": labels.copy(), "fixed": fixed, "near": near}
    recorded = {}
    for model, p in preds.items():
        (r,) = dsreg.record("toy@original", p, model=model, meta={"run": model}, registry=reg)
        recorded[model] = r.digest
    return Toy(reg=reg, labels=labels, snapshot=snap, preds=preds, recorded=recorded)

"""Fixtures of the remote tests: an S3 server (moto on loopback, through dvc-s3)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


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

"""``dsreg add --license``: the licence is recorded in the snapshot (``source.license``: an SPDX
id in its canonical case, or a URL), only when given, so a snapshot made without one keeps its
digest; it is repeated by CFF, the text citation, DataCite and Croissant; anything else is
refused in one line, with nothing written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dsreg
from dsreg.registry.reader import LocalReader
from dsreg.report.croissant import croissant_metadata
from tests.conftest import CliResult


@pytest.fixture
def labels(tmp_path: Path) -> Path:
    np.save(tmp_path / "l.npy", np.array([0, 1, 1, 2], dtype=np.int64))
    (tmp_path / "classes.txt").write_text("a\nb\nc\n")
    return tmp_path / "l.npy"


def _add(cli: Callable[..., CliResult], reg: Path, labels: Path, *extra: str) -> str:
    dsreg.init(registry=reg)
    res = cli("add", "ds", "--labels", str(labels), "--classes", str(labels.parent / "classes.txt"),
              *extra, "--registry", str(reg))  # fmt: skip
    assert res.exit_code == 0, res.stderr
    return res.stdout.strip()


def test_the_licence_is_recorded_only_when_given_and_repeated_by_every_record(
    labels: Path, tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    reg = tmp_path / "reg"
    plain = _add(cli, reg, labels, "--tag", "plain")
    licensed = _add(cli, reg, labels, "--tag", "licensed", "--license", "cc-by-4.0")
    r = dsreg.Registry(reg)
    snap_plain = r.snapshot(r.revision(plain).snapshot)
    snap_licensed = r.snapshot(r.revision(licensed).snapshot)
    assert "license" not in snap_plain.source and "license" not in snap_plain.to_dict()["source"]
    assert snap_licensed.source["license"] == "CC-BY-4.0"  # the SPDX list's case
    assert {k: v for k, v in snap_licensed.source.items() if k != "license"} == snap_plain.source
    assert plain != licensed  # another licence, another snapshot
    # Adding again without a licence gives the same revision as before: nothing moved.
    assert _add(cli, reg, labels, "--tag", "plain") == plain

    cff = dsreg.cite("ds@licensed", format="cff", registry=r)
    assert 'license: "CC-BY-4.0"' in str(cff).splitlines()
    assert "License: CC-BY-4.0." in dsreg.cite("ds@licensed", format="text", registry=r).text()
    assert dsreg.cite("ds@licensed", registry=r).to_dict()["license"] == "CC-BY-4.0"
    assert "license" not in dsreg.cite("ds@plain", registry=r).to_dict()
    assert "license" not in str(dsreg.cite("ds@plain", format="cff", registry=r))
    datacite = tmp_path / "datacite.json"
    dsreg.export("ds@licensed", datacite, format="datacite", registry=r)
    rights = json.loads(datacite.read_text())["data"]["attributes"]["rightsList"]
    assert rights == [{
        "rights": "CC-BY-4.0", "rightsUri": "https://spdx.org/licenses/CC-BY-4.0.html",
        "rightsIdentifier": "CC-BY-4.0", "rightsIdentifierScheme": "SPDX",
        "schemeUri": "https://spdx.org/licenses/",
    }]  # fmt: skip
    doc: dict[str, Any] = croissant_metadata(LocalReader(r).revision("ds@licensed"))
    assert doc["license"] == "https://spdx.org/licenses/CC-BY-4.0.html"
    assert "license" not in croissant_metadata(LocalReader(r).revision("ds@plain"))


def test_a_licence_url_is_kept_as_given(
    labels: Path, tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    url = "https://example.org/terms/dataset-licence-v2"
    _add(cli, tmp_path / "reg", labels, "--tag", "v1", "--license", url)
    r = dsreg.Registry(tmp_path / "reg")
    assert f'license-url: "{url}"' in str(dsreg.cite("ds@v1", format="cff", registry=r))
    assert croissant_metadata(LocalReader(r).revision("ds@v1"))["license"] == url


@pytest.mark.parametrize(
    "given", ["CC-BY-40", "MIT AND Apache-2.0", "LicenseRef-ours", "ftp://example.org/l", ""]
)
def test_a_licence_that_is_neither_an_spdx_id_nor_a_url_is_refused_with_nothing_written(
    labels: Path,
    tmp_path: Path,
    cli: Callable[..., CliResult],
    registry_state: Callable[[Path], Any],
    given: str,
) -> None:
    reg = tmp_path / "reg"
    _add(cli, reg, labels, "--tag", "v1")
    before = registry_state(reg)
    res = cli("add", "ds", "--labels", str(labels), "--classes", str(tmp_path / "classes.txt"),
              "--tag", "v2", "--license", given, "--registry", str(reg))  # fmt: skip
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.startswith("Error: --license") and res.stderr.count("\n") == 1
    assert "SPDX" in res.stderr
    assert registry_state(reg) == before

"""``Dataset.labels()`` of a voted-on revision does not pull pandas in: pyarrow imports it
behind ``pa.array`` and ``to_numpy``, and importing pandas costs more than the read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

import dsreg

SCRIPT = """
import sys, dsreg
table = dsreg.open("toy@corrected", registry=sys.argv[1]).labels()
print(table.num_rows, table.column("label").to_pylist(), "pandas" in sys.modules)
"""


def test_labels_of_a_voted_view_does_not_import_pandas(tmp_path: Path) -> None:
    reg = dsreg.init(registry=tmp_path / "reg")
    np.save(tmp_path / "labels.npy", np.array([0, 0, 1, 1]))
    dsreg.add("toy", labels=tmp_path / "labels.npy", classes=["cat", "dog"], tag="original",
              registry=reg)  # fmt: skip
    (tmp_path / "votes.csv").write_text(
        "example_id,given_label,suggested_label,given,guessed,both,neither\n"
        "1,cat,dog,0,5,0,0\n"
        "2,dog,cat,5,0,0,0\n"
    )
    ov = dsreg.import_votes("toy@original", tmp_path / "votes.csv", format="csv", registry=reg)
    dsreg.tag("toy@corrected", "toy@original", overlays=[ov.digest], view="corrected",
              registry=reg)  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(reg.root)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split(maxsplit=1)
    assert out == ["4", "[0, 1, 1, 1] False\n"]

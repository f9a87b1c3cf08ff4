"""A ``--classes`` file holds one class name per line, lines ending at ``\\n`` or ``\\r\\n``
only: a name holding U+2028, U+0085 or a form feed (which ``str.splitlines`` breaks at) stays
one name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import dsreg
from dsreg import Registry
from dsreg.errors import DatasetFormatError
from dsreg.ingest.sources import read_classes


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_names_with_unicode_line_separators_stay_one_class(
    make_registry: Callable[..., Registry], tmp_path: Path, ending: str
) -> None:
    names = ["street\u2028sign", "next\x85line", "form\x0cfeed", "plain"]
    path = tmp_path / "classes.txt"
    path.write_bytes(ending.join(names).encode() + ending.encode())
    assert read_classes(path) == tuple(names)
    labels = tmp_path / "labels.npy"
    np.save(labels, np.array([0, 1, 2, 3, 0]))
    reg = make_registry()
    dsreg.add("signs", labels=labels, classes=path, tag="v1", registry=reg)
    assert dsreg.open("signs@v1", registry=reg).classes == tuple(names)


def test_a_lone_carriage_return_ends_no_line(tmp_path: Path) -> None:
    path = tmp_path / "classes.txt"
    path.write_bytes(b"cat\rdog\nbird\n")
    assert read_classes(path) == ("cat\rdog", "bird")
    path.write_bytes(b"cat\n\nbird\n")
    with pytest.raises(DatasetFormatError, match="empty line 2"):
        read_classes(path)

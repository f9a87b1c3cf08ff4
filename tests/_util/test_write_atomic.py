"""write_atomic and replacing: a write that landed is never reported as failed, and one that
did not leaves no temporary file."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from dsreg._util.fs import replacing, write_atomic


def _failing_unlink(*args: object, **kwargs: object) -> None:
    raise OSError(errno.EIO, os.strerror(errno.EIO))


def test_a_landed_write_is_not_an_error_when_cleanup_would_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by test_checkout_interrupted: an I/O error from the cleanup's unlink, after the
    # rename had put the checkout journal in place, was reported as "nothing was changed".
    monkeypatch.setattr(os, "unlink", _failing_unlink)
    write_atomic(tmp_path / "j", b"new")
    with replacing(tmp_path / "out") as f:
        f.write(b"out")
    monkeypatch.undo()
    assert (tmp_path / "j").read_bytes() == b"new"
    assert (tmp_path / "out").read_bytes() == b"out"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j", "out"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "j").write_bytes(b"old")

    def failing_replace(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        write_atomic(tmp_path / "j", b"new")
    with pytest.raises(OSError), replacing(tmp_path / "j") as f:
        f.write(b"new")
    monkeypatch.undo()
    assert (tmp_path / "j").read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["j"]

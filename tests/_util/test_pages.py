"""``import dsreg`` turns numpy's huge-page advice off, unless the user chose (dsreg._util.pages).

Each case runs in a fresh interpreter: the advice is process state, read by numpy at import."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# numpy's switch returns the setting it replaces: printing what it returns shows the process's
# setting without changing what the test looks at.
_SHOW = (
    "import numpy; core = getattr(numpy, '_core', None) or numpy.core; "
    "print(core.multiarray._set_madvise_hugepage(False))"
)
# The advice switched on by hand: a test that starts from it does not rest on numpy's default.
_ON = (
    "import numpy; core = getattr(numpy, '_core', None) or numpy.core; "
    "core.multiarray._set_madvise_hugepage(True)"
)


def _run(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    out = subprocess.run(
        [sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_import_dsreg_first_turns_it_off() -> None:
    # numpy reads the variable when it is imported, after dsreg set it.
    code = f"import os, dsreg; print(os.environ['NUMPY_MADVISE_HUGEPAGE']); {_SHOW}"
    assert _run(code).split() == ["0", "False"]


def test_numpy_imported_first_is_turned_off_too() -> None:
    # The advice switched on explicitly, so the test does not rest on numpy's default.
    assert _run(f"{_ON}; import dsreg; {_SHOW}") == "False"


@pytest.mark.parametrize("choice", ["1", "0"])
def test_the_users_choice_stands(choice: str) -> None:
    want = "True" if choice == "1" else "False"
    assert _run(f"import dsreg; {_SHOW}", NUMPY_MADVISE_HUGEPAGE=choice) == want
    # numpy imported first, having read the choice: dsreg leaves its switch alone.
    assert _run(f"import numpy; import dsreg; {_SHOW}", NUMPY_MADVISE_HUGEPAGE=choice) == want


def test_import_dsreg_does_not_import_numpy() -> None:
    # The add of a tree forks its workers before numpy is imported; the switch must not
    # import it.
    assert _run("import sys, dsreg; print('numpy' in sys.modules)") == "False"

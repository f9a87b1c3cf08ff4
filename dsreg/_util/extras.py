"""The package's optional extras, and the one refusal of what needs one that is not installed.

The base install holds what the core commands import. A command, option or method that needs
more names its extra here (``require("review", "dsreg review")``) before it imports or writes
anything: when a module of that extra cannot be found, it fails with one line naming the
install command, ``dsreg review needs: pip install 'dsreg[review]'``. The check finds the
modules without importing them, so it costs a command nothing when they are installed.
"""

from __future__ import annotations

import importlib.util

from dsreg.errors import MissingExtraError

__all__ = ["EXTRAS", "installed", "require"]

# Each extra of pyproject.toml's [project.optional-dependencies] that a part of dsreg needs, and
# the top-level modules it brings that dsreg imports (tests/packaging/test_extras.py holds the
# two lists equal).
EXTRAS: dict[str, tuple[str, ...]] = {
    "review": ("starlette", "uvicorn", "jinja2"),
    "audit": ("numba", "PIL"),
    "plot": ("matplotlib",),
    "dvc": ("dvc",),
    "s3": ("dvc", "dvc_s3"),
    "ray": ("ray",),
    "torch": ("torch", "PIL"),
    "hf": ("datasets", "PIL"),
    "pandas": ("pandas",),
    "polars": ("polars",),
}


def installed(module: str) -> bool:
    """Whether top-level ``module`` can be imported (found on the path, or imported already;
    ``sys.modules[module] = None`` blocks it, as Python's import does)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # imported already, without a spec (a module made at run time)
        return True


def require(extra: str, what: str) -> None:
    """Refuse ``what`` (``"dsreg review"``, ``"Dataset.to_torch"``) unless every module of
    ``extra`` is installed."""
    if not all(installed(m) for m in EXTRAS[extra]):
        raise MissingExtraError(f"{what} needs: pip install 'dsreg[{extra}]'", extra=extra)

"""The package's optional extras, and the one refusal of what needs one that is not installed.

The base install holds what the core commands import. A command, option or method that needs
more names its extra here (``require("review", "dsreg review", python="dsreg.review")``) before
it imports or writes anything: when a module of that extra cannot be found, it fails with one
line naming what the caller used and the install command. The caller is the command line
while ``on_command_line`` holds (the CLI's entry point), so a user who typed ``dsreg review``
reads ``dsreg review needs: pip install 'dsreg[review]'``, and one who called the library
reads ``dsreg.review needs: pip install 'dsreg[review]'``. The check finds the modules without
importing them, so it costs a command nothing when they are installed.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from contextvars import ContextVar

from dsreg.errors import MissingExtraError

__all__ = ["EXTRAS", "installed", "on_command_line", "require"]

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


# Whether the running call came from the command line (``on_command_line``), else Python.
_COMMAND_LINE: ContextVar[bool] = ContextVar("command_line", default=False)


@contextlib.contextmanager
def on_command_line() -> Iterator[None]:
    """The calls in this block come from the command line: a refusal names the command."""
    token = _COMMAND_LINE.set(True)
    try:
        yield
    finally:
        _COMMAND_LINE.reset(token)


def require(extra: str, what: str, *, python: str | None = None) -> None:
    """Refuse ``what`` unless every module of ``extra`` is installed. ``what`` is the command
    or option as the command line has it (``"dsreg review"``, ``"--plot"``) and ``python`` the
    library's function or argument (``"dsreg.review"``), when it is another name (none for
    ``"Dataset.to_torch"``): the refusal names the one the caller used."""
    if not all(installed(m) for m in EXTRAS[extra]):
        said = what if python is None or _COMMAND_LINE.get() else python
        raise MissingExtraError(f"{said} needs: pip install 'dsreg[{extra}]'", extra=extra)

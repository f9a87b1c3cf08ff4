"""Imports made when first used, written where a reader and a static tool can follow them.

A module that must stay off a light path (``import dsreg``, a re-add of an unchanged tree, a
tag) is imported at module level all the same, in two lines a type checker reads as the plain
import::

    if TYPE_CHECKING:
        from dsreg.ops.checkout import apply as checkout_ops
    else:
        checkout_ops = lazy_module("dsreg.ops.checkout.apply")

``checkout_ops.checkout(...)`` then imports the module on its first call, and every later call
reads the module's attribute again (a test's monkeypatch of it is seen).

A package whose names are each imported from their own module on first use (``dsreg.api``, and
through it ``dsreg``) lists them once, as the re-exports of its ``if TYPE_CHECKING:`` block
(``from M import name as name``, the form type checkers read as a re-export), and hands
``lazy_names(__name__)`` its ``__getattr__`` and ``__dir__``: they read that block from the
package's own source. ``from dsreg.api import registry`` asks the package's ``__getattr__``
for a submodule not imported yet: a name that is a submodule is imported as such, without that
source being read, so the command line's ``from dsreg.api import registry as registry_api``
stays light (a submodule and an exported name never share a name: ``tests/test_api.py``
checks it).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["LazyModule", "lazy_module", "lazy_names", "reexports"]


class LazyModule(ModuleType):
    """Module ``name``, imported when one of its attributes is first read or set. Every access
    goes to the module itself: nothing is copied, so what is read is what the module holds."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        # ModuleType sets these to None; absent here, they are read from the module.
        for attr in ("__doc__", "__package__", "__loader__", "__spec__"):
            del self.__dict__[attr]

    def _module(self) -> ModuleType:
        module = self.__dict__.get("_LazyModule__module")
        if module is None:
            module = importlib.import_module(self.__name__)
            self.__dict__["_LazyModule__module"] = module
        return module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._module(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self._module(), attr, value)

    def __delattr__(self, attr: str) -> None:
        delattr(self._module(), attr)

    def __dir__(self) -> list[str]:
        return dir(self._module())

    def __repr__(self) -> str:
        loaded = "_LazyModule__module" in self.__dict__
        return f"<module {self.__name__!r} ({'imported' if loaded else 'not imported yet'})>"


def lazy_module(name: str) -> ModuleType:
    """Module ``name``: itself when it is imported already, else a :class:`LazyModule` that
    imports it on first use. An unknown name raises ``ModuleNotFoundError`` at that use, as a
    plain import inside a function would."""
    module = sys.modules.get(name)
    return module if module is not None else LazyModule(name)


def reexports(source: str) -> dict[str, tuple[str, str]]:
    """``{name: (module, attribute)}`` for each ``from module import attribute as name`` of the
    top-level ``if TYPE_CHECKING:`` block of ``source`` where ``name`` is ``attribute`` (the
    redundant alias that marks a re-export to type checkers); other imports there are the
    module's own and not listed."""
    import ast

    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
                for alias in stmt.names:
                    if alias.asname == alias.name:
                        found[alias.name] = (stmt.module, alias.name)
    return found


def _is_type_checking(test: object) -> bool:
    import ast

    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def lazy_names(
    package: str,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for module ``package`` (PEP 562): each name its
    ``if TYPE_CHECKING:`` block re-exports (:func:`reexports`) is imported from its module when
    first read, and then kept in ``package``'s namespace; ``__all__`` lists those names.

    The block is read from ``package``'s source on the first name asked for, so type checkers
    and this loader read the same lines and cannot disagree."""
    table: dict[str, tuple[str, str]] = {}

    def names() -> dict[str, tuple[str, str]]:
        if not table:
            module = sys.modules[package]
            loader = getattr(module.__spec__, "loader", None)
            source = loader.get_source(package) if loader is not None else None
            if source is None:
                raise ImportError(f"cannot read the source of {package} to find its names")
            table.update(reexports(source))
        return table

    def __getattr__(name: str) -> Any:
        if not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}"):
            return importlib.import_module(f"{package}.{name}")
        if name == "__all__":
            value: Any = sorted(names())
        elif name not in names():
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        else:
            module, attribute = names()[name]
            value = getattr(importlib.import_module(module), attribute)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names()))

    return __getattr__, __dir__

"""Imports made when first used, written where a reader and a static tool can follow them.

A module that must stay off a light path (``import dsreg``, a re-add of an unchanged tree, a
tag) is imported at module level all the same, as a plain import inside one block, which type
checkers, import contracts and readers take for the import it is (the shape of PEP 810's lazy
imports)::

    with lazy_imports():
        import numpy as np
        from dsreg.ops.checkout import apply as checkout_ops

Inside the block each statement binds its name to the module it names, not imported yet
(:func:`lazy_module`): ``checkout_ops.checkout(...)`` imports the module on its first call, and
every later call reads the module's attribute again (a test's monkeypatch of it is seen). Only
modules can be named so (``import name``, ``import package.module as alias``, ``from package
import module [as alias]``): a name that is not a module (a class, a function) stays in the
``if TYPE_CHECKING:`` block beside it when only annotations use it.

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

import _thread
import builtins
import importlib
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, ClassVar

__all__ = ["LazyModule", "lazy_imports", "lazy_module", "lazy_names", "reexports"]


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


class _Package:
    """What a ``from package import module`` inside :class:`lazy_imports` reads its names from:
    each is the submodule, not imported yet. For ``import a.b.c as x`` (``target`` ``a.b.c``)
    the statement reads ``b`` of package ``a``, then ``c`` of that: the packages on the way
    are passed through, and only the module named is bound."""

    def __init__(self, name: str, target: str | None = None) -> None:
        self.name = name
        self.target = target

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        name = f"{self.name}.{attr}"
        if self.target is not None and name != self.target:
            return _Package(name, self.target)
        return lazy_module(name)


class lazy_imports:
    """``with lazy_imports():`` makes the imports of its block, and only of the module whose
    top level holds it, lazy (:func:`lazy_module`). Any other import made meanwhile (another
    thread's, say) is the ordinary one."""

    _lock: ClassVar = _thread.allocate_lock()
    # id of a module's globals -> the blocks open in it; the import they replace.
    _modules: ClassVar[dict[int, int]] = {}
    _plain: ClassVar[Callable[..., ModuleType] | None] = None

    def __enter__(self) -> None:
        self._globals = sys._getframe(1).f_globals
        with self._lock:
            cls = type(self)
            if not cls._modules:
                cls._plain = builtins.__import__
                # Typed as returning a module; a ``from`` import is handed a _Package here.
                builtins.__import__ = cls._import  # type: ignore[assignment]
            key = id(self._globals)
            cls._modules[key] = cls._modules.get(key, 0) + 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            cls = type(self)
            key = id(self._globals)
            cls._modules[key] -= 1
            if not cls._modules[key]:
                del cls._modules[key]
            if not cls._modules and cls._plain is not None:
                builtins.__import__ = cls._plain
                cls._plain = None

    @classmethod
    def _import(
        cls,
        name: str,
        globals: dict[str, Any] | None = None,
        locals: Any = None,
        fromlist: Any = (),
        level: int = 0,
    ) -> Any:
        plain = cls._plain or importlib.__import__
        if globals is None or id(globals) not in cls._modules:
            return plain(name, globals, locals, fromlist, level)
        if level or "*" in (fromlist or ()):
            raise ImportError(f"a lazy import names its modules absolutely and one by one: {name}")
        if fromlist:
            return _Package(name)
        top, dot, _ = name.partition(".")
        return _Package(top, name) if dot else lazy_module(name)


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

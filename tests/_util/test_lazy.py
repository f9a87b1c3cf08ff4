"""Imports made when first used: a lazy module is the module itself on every access, and a
package's names are the re-exports its ``TYPE_CHECKING`` block lists, those and no others."""

from __future__ import annotations

import importlib
import importlib.util
import keyword
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsreg._util.lazy import LazyModule, lazy_module, reexports

_IDENT = st.builds(
    str.__add__,
    st.sampled_from("abcxyz"),
    st.text(alphabet="abcxyz019_", max_size=6),
).filter(lambda s: not keyword.iskeyword(s))
# An import line of the block: (module, attribute, alias); alias None is no ``as``.
_IMPORT = st.tuples(
    st.lists(_IDENT, min_size=1, max_size=3).map(".".join),
    _IDENT,
    st.one_of(st.none(), _IDENT),
)


def _source(block: list[tuple[str, str, str | None]], outside: list[tuple[str, str, str | None]]):
    def line(module: str, attr: str, alias: str | None, indent: str) -> str:
        return f"{indent}from {module} import {attr}" + (f" as {alias}" if alias else "") + "\n"

    body = "".join(line(*i, "    ") for i in block) or "    pass\n"
    rest = "".join(line(*i, "") for i in outside)
    return f"from typing import TYPE_CHECKING\n{rest}if TYPE_CHECKING:\n{body}else:\n    x = 1\n"


@settings(max_examples=100)
@given(st.lists(_IMPORT, max_size=12), st.lists(_IMPORT, max_size=4))
def test_reexports_are_the_block_imports_named_as_themselves(
    block: list[tuple[str, str, str | None]], outside: list[tuple[str, str, str | None]]
) -> None:
    expected: dict[str, tuple[str, str]] = {}
    for module, attr, alias in block:
        if alias == attr:
            expected[attr] = (module, attr)
    assert reexports(_source(block, outside)) == expected


@pytest.fixture
def plain_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module of its own on the path, not imported yet."""
    name = f"lazy_probe_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("VALUE = 1\n\ndef twice(x):\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_a_lazy_module_imports_on_first_use_and_reads_the_module_each_time(
    plain_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lazy = lazy_module(plain_module)
    assert isinstance(lazy, LazyModule) and plain_module not in sys.modules
    assert "not imported yet" in repr(lazy)
    assert lazy.twice(4) == 8
    real = sys.modules[plain_module]
    # What is set through it, or on the module by a test, is what both read.
    monkeypatch.setattr(real, "twice", lambda x: -x)
    assert lazy.twice(4) == -4
    lazy.VALUE = 5
    assert real.VALUE == 5 and "VALUE" not in vars(lazy)
    assert lazy.__spec__ is real.__spec__
    # Asked again once imported: the module itself.
    assert lazy_module(plain_module) is real


def test_an_unknown_module_fails_where_it_is_first_used() -> None:
    lazy = lazy_module("no_such_module_for_dsreg_tests")
    with pytest.raises(ModuleNotFoundError):
        lazy.anything  # noqa: B018


@pytest.fixture
def lazy_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package whose ``TYPE_CHECKING`` block re-exports ``VALUE`` and ``twice`` (and imports
    ``Path`` for itself), read by ``lazy_names``."""
    pkg = f"lazy_pkg_{tmp_path.name.replace('-', '_')}"
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "inner.py").write_text("VALUE = 7\n\ndef twice(x):\n    return 2 * x\n")
    (tmp_path / pkg / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from pathlib import Path\n"
        f"    from {pkg}.inner import VALUE as VALUE\n"
        f"    from {pkg}.inner import twice as twice\n"
        "else:\n"
        "    from dsreg._util.lazy import lazy_names\n"
        "    __getattr__, __dir__ = lazy_names(__name__)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield pkg
    for name in [m for m in sys.modules if m == pkg or m.startswith(pkg + ".")]:
        del sys.modules[name]


def test_a_package_exports_the_names_its_block_lists(lazy_package: str) -> None:
    package = importlib.import_module(lazy_package)
    assert f"{lazy_package}.inner" not in sys.modules
    assert package.__all__ == ["VALUE", "twice"]
    assert {"VALUE", "twice"} <= set(dir(package))
    assert package.VALUE == 7 and package.twice(3) == 6
    assert "twice" in vars(package)  # kept once imported
    for absent in ("Path", "inner_value"):
        with pytest.raises(AttributeError, match=absent):
            getattr(package, absent)


@pytest.fixture
def two_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package ``P`` with modules ``P.one`` and ``P.sub.two``, none imported yet."""
    pkg = f"lazy_imp_{tmp_path.name.replace('-', '_')}"
    (tmp_path / pkg / "sub").mkdir(parents=True)
    (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / pkg / "sub" / "__init__.py").write_text("")
    (tmp_path / pkg / "one.py").write_text("VALUE = 1\n")
    (tmp_path / pkg / "sub" / "two.py").write_text("VALUE = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield pkg
    for name in [m for m in sys.modules if m == pkg or m.startswith(pkg + ".")]:
        del sys.modules[name]


def test_a_lazy_imports_block_binds_modules_imported_on_first_use(two_packages: str) -> None:
    pkg = two_packages
    source = (
        "from dsreg._util.lazy import lazy_imports\n"
        "with lazy_imports():\n"
        f"    import {pkg}\n"
        f"    import {pkg}.sub.two as two\n"
        f"    from {pkg} import one\n"
        f"    from {pkg}.sub import two as again\n"
    )
    namespace: dict[str, object] = {"__name__": "probe"}
    exec(compile(source, "probe.py", "exec"), namespace)
    assert not [m for m in sys.modules if m.startswith(pkg)]
    assert namespace["two"].VALUE == 2  # type: ignore[attr-defined]
    assert f"{pkg}.sub.two" in sys.modules and f"{pkg}.one" not in sys.modules
    assert namespace["one"].VALUE == 1  # type: ignore[attr-defined]
    assert namespace["again"].VALUE == 2  # type: ignore[attr-defined]
    assert namespace[pkg].__name__ == pkg  # type: ignore[attr-defined]
    # Once the block is left, an import is the ordinary one again.
    assert __import__(pkg) is sys.modules[pkg]
    assert __import__.__module__ == "builtins"


def test_a_lazy_imports_block_refuses_a_relative_or_star_import() -> None:
    for line in ("from . import x", "from os import *"):
        source = f"from dsreg._util.lazy import lazy_imports\nwith lazy_imports():\n    {line}\n"
        with pytest.raises(ImportError, match="absolutely"):
            exec(compile(source, "probe.py", "exec"), {"__name__": "probe"})
    assert __import__.__module__ == "builtins"


def _lazy_blocks() -> Iterator[tuple[str, str]]:
    """``(file, module)`` for each module named in a ``with lazy_imports():`` block of dsreg."""
    import ast

    root = Path(__file__).resolve().parents[2] / "dsreg"
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not (isinstance(node, ast.With) and "lazy_imports" in ast.unparse(node.items[0])):
                continue
            for stmt in node.body:
                if isinstance(stmt, ast.Import):
                    yield from ((path.name, a.name) for a in stmt.names)
                elif isinstance(stmt, ast.ImportFrom):
                    yield from ((path.name, f"{stmt.module}.{a.name}") for a in stmt.names)


def test_every_name_of_a_lazy_imports_block_is_a_module() -> None:
    named = list(_lazy_blocks())
    assert len(named) > 20  # the blocks are found
    missing = [
        f"{file}: {module}" for file, module in named if not importlib.util.find_spec(module)
    ]
    assert not missing, f"not modules (keep these in the TYPE_CHECKING block): {missing}"

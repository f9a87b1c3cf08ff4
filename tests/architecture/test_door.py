"""One door (docs/architecture.md, "One door"): the public API resolves each spec it is given
once, into a ``Resolved`` handle bound to the reader that read it; below ``dsreg/api/`` no
function takes a spec and nothing resolves one again.

These read the code, as the other house rules do: a new function below the API that takes
``spec: str``, or a call that resolves a spec on the way down, fails here with its place."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dsreg"
# Where a spec may be resolved: the readers themselves, the SQL connection (a query names its
# revisions in its text), and a pull asking for a revision the remote holds under no tag.
DOORS = {
    "dsreg/registry/reader.py",
    "dsreg/remote/read.py",
    "dsreg/views/sql.py",
    "dsreg/remote/transfer.py",
}
# Reader methods that resolve a spec.
RESOLVING = {"revision", "resolve"}
SPEC_NAMES = {"spec", "specs", "source_spec"}


def _below_api() -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("dsreg/api/", "dsreg/cli/")) or rel == "dsreg/__init__.py":
            continue
        out.append((rel, ast.parse(path.read_text(encoding="utf-8"))))
    return out


def _is_str(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    text = ast.unparse(annotation)
    return text in ("str", "Sequence[str]", "Iterable[str]", "list[str]", "tuple[str, ...]")


def test_no_function_below_the_api_takes_a_spec() -> None:
    found = []
    for rel, tree in _below_api():
        if rel in DOORS:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            a = node.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs:
                if arg.arg in SPEC_NAMES and _is_str(arg.annotation):
                    found.append(f"{rel}:{node.lineno} {node.name}({arg.arg}: ...)")
    assert not found, "functions below dsreg/api/ taking a spec: " + ", ".join(found)


def test_nothing_below_the_api_resolves_a_spec_again() -> None:
    """No ``.resolve(...)`` anywhere below the API, and ``.revision(spec)`` of a reader only in
    the doors; ``Registry.revision(digest)`` reads a manifest by its digest, and is named
    ``reg.revision``, ``registry.revision`` or ``self.revision``."""
    manifest_readers = {"reg", "registry", "self", "r", "base", "mirror", "store"}
    found = []
    for rel, tree in _below_api():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name, owner = node.func.attr, node.func.value
            if name == "resolve" and node.args:
                found.append(f"{rel}:{node.lineno} .resolve(...)")
            if name == "revision" and rel not in DOORS:
                held = owner.id if isinstance(owner, ast.Name) else ast.unparse(owner)
                if held not in manifest_readers and not held.endswith("registry"):
                    found.append(f"{rel}:{node.lineno} {held}.revision(...)")
    assert not found, "specs resolved below dsreg/api/: " + ", ".join(found)


def test_the_registry_has_no_resolve_of_its_own() -> None:
    """Resolving is the reader's: a second way would let layers drift apart again."""
    from dsreg.registry.folder import Registry

    assert not hasattr(Registry, "resolve")

"""The package's shape (docs/architecture.md): what the import contracts in ``make lint`` do not
already hold. A newcomer reads dsreg bottom-up; these keep that possible."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import grimp
import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dsreg"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("dsreg")


def _modules() -> list[tuple[str, Path, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        out.append((name, path, ast.parse(path.read_text())))
    return out


def test_no_module_imports_itself_back(graph: grimp.ImportGraph) -> None:
    """No import cycle, at module level or inside functions (grimp sees both)."""
    cycles = []
    for module in sorted(graph.modules):
        if not module.startswith("dsreg."):
            continue
        for dep in graph.find_modules_directly_imported_by(module):
            if dep.startswith("dsreg.") and dep != module:
                back = graph.find_shortest_chain(importer=dep, imported=module)
                if back is not None:
                    cycles.append((module, *back))
    assert not cycles, f"import cycles: {cycles[:5]}"


def test_no_folder_holds_more_than_a_dozen_modules() -> None:
    counts = Counter(
        path.parent.relative_to(PACKAGE).as_posix()
        for _name, path, _tree in _modules()
        if path.name != "__init__.py"
    )
    big = {folder: n for folder, n in counts.items() if n > 12}
    assert not big, f"folders with more than 12 modules: {big}"


def test_no_private_name_is_imported_from_another_module() -> None:
    """A helper two modules share gets a public name in the lower one."""
    found = []
    for name, _path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dsreg"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{name}: from {node.module} import {alias.name}")
    assert not found, found


def test_blake3_is_called_from_one_module() -> None:
    """Every digest goes through dsreg.objects.hashing."""
    importers = sorted(
        name
        for name, _path, tree in _modules()
        for node in ast.walk(tree)
        if (isinstance(node, ast.Import) and any(a.name == "blake3" for a in node.names))
        or (isinstance(node, ast.ImportFrom) and node.module == "blake3")
    )
    assert importers == ["dsreg.objects.hashing"]


def test_the_detector_knows_nothing_of_the_registry(graph: grimp.ImportGraph) -> None:
    """Arrays in, arrays out: overlay creation composes it with the registry one layer up."""
    reached = set()
    for module in graph.find_children("dsreg.detector"):
        reached |= graph.find_upstream_modules(module)
    registry_side = sorted(
        m for m in reached if m.startswith(("dsreg.registry", "dsreg.views", "dsreg.ingest"))
    )
    assert not registry_side


def test_the_ref_log_has_one_writer() -> None:
    """Only dsreg.registry.refs touches a registry's logs folder (under the dataset lock, with the
    torn-line repair); everyone else goes through RefStore's methods."""
    outside = sorted(
        name
        for name, _path, tree in _modules()
        if name != "dsreg.registry.refs"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "logs"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "refs"
    )
    assert not outside, outside


# What parses JSON: the standard library's load/loads, a decoder of one's own, or another parser.
_JSON_PARSE = re.compile(
    r"json\.load|JSONDecoder|raw_decode|orjson|ujson|simplejson|rapidjson|pyarrow\.json|read_json"
)
_JSON_READER = "dsreg._util.jsonread"


def test_json_is_parsed_by_the_bounded_reader_alone() -> None:
    """Every JSON document dsreg reads goes through ``dsreg._util.jsonread`` (its depth and size
    bounded, one line naming a refused document): no other module names a JSON parser, as
    ``grep -rn json.load dsreg`` would find it, or imports ``json``'s readers under another
    name."""
    named = [
        f"{name}:{n}: {line.strip()}"
        for name, path, _tree in _modules()
        if name != _JSON_READER
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if _JSON_PARSE.search(line)
    ]
    assert not named, named
    aliased = []
    for name, _path, tree in _modules():
        if name == _JSON_READER:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "json":
                aliased += [f"{name}: from json import {a.name}" for a in node.names]
            if isinstance(node, ast.Attribute) and node.attr in ("load", "loads", "JSONDecoder"):
                value = node.value
                if isinstance(value, ast.Name) and "json" in value.id.lower():
                    aliased.append(f"{name}: {value.id}.{node.attr}")
    assert not aliased, aliased
    # The reader itself is what the others call.
    callers = {
        name
        for name, _path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == _JSON_READER
    }
    assert {
        "dsreg.formats.canonical",
        "dsreg.formats.reflog",
        "dsreg.overlays.votes.labelerrors",
    } <= callers

"""The seams of ../shared/DESIGN.md hold: import-linter's contracts (pyproject.toml,
``[tool.importlinter]``) are all kept, and no import cycle exists outside TYPE_CHECKING."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_contracts_are_kept():
    linter = Path(sys.executable).with_name("lint-imports")
    checked = subprocess.run([str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                             timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "0 broken" in checked.stdout


def _extension_import(graph, importer: str, package: str) -> bool:
    """``from package import _ext`` of a compiled module the graph cannot see (it names the
    package): the import of a leaf, not of the package's ``__init__``."""
    details = graph.get_import_details(importer=importer, imported=package)
    for detail in details:
        line = detail["line_contents"]
        if not line.startswith(f"from {package} import _"):
            return False
        name = line.split(" import ", 1)[1].split()[0]
        try:
            spec = importlib.util.find_spec(f"{package}.{name}")
        except ModuleNotFoundError:  # ``package`` is a module: ``name`` is one of its names
            return False
        if spec is None or not (spec.origin or "").endswith(".so"):
            return False
    return bool(details)


def test_no_import_cycle_outside_type_checking():
    """Every module-level or deferred import, TYPE_CHECKING ones aside, goes one way: no set
    of modules imports itself round (a package's ``__init__`` included)."""
    graph = grimp.build_graph("rill", "pyspark_rill", exclude_type_checking_imports=True)
    edges = {module: {imported for imported in graph.find_modules_directly_imported_by(module)
                      if not _extension_import(graph, module, imported)}
             for module in graph.modules}
    cycles, index, low, stack, on_stack = [], {}, {}, [], set()

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in edges[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    assert cycles == []


def test_protocols_and_transports_call_no_service_of_the_core():
    """One door: what protocols and transports hold of the core is ``Broker`` and its facades,
    never a service (``core.topics``, ``core.messages``, ...)."""
    services = re.compile(r"core\.(messages|streams|topics|partitions|users|tokens|"
                          r"consumer_offsets|consumer_groups|system|transactions|clients|"
                          r"snapshot)\b")
    server = ROOT / "src/rill/server"
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for folder in ("protocols", "transports") for path in (server / folder).rglob("*.py")
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if services.search(line)]
    assert found == []


def test_no_core_module_names_the_metadata_store():
    core = ROOT / "src/rill/server/core"
    assert [path.name for path in core.rglob("*.py") if "MetadataStore" in path.read_text()] == []

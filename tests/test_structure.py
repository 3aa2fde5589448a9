"""The module structure of the packages (docs/design/runtime-structure.md and
docs/design/scheduler-structure.md): the imports between their modules form no cycle, not
even for the type checker, no module imports another package's private module, the product
never imports the benchmarks or the tests, the wire protocol is a leaf (:mod:`apgaspy.wire`
imports the standard library alone) that alone spells the protocol's lines, and every error
class of a package lives in that package's exceptions module.

Every module is imported, and the imports are read from the source with :mod:`ast` (every
``import`` statement: those inside functions, and those under ``if TYPE_CHECKING:``, which
never run but still tie a module to another for a reader and for the type checker).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("apgaspy", "glb", "communicators", "scheduler", "benchmarks")
#: The packages a user installs: none of them imports ``benchmarks`` or ``tests``.
PRODUCT = ("apgaspy", "glb", "communicators", "scheduler")

#: Imports for the type checker only that still close a cycle: a room of a place naming the
#: runtime that owns it.  None is left (every room names what it needs as a protocol of
#: apgaspy._runtime_needs); the list may only stay empty.
TYPE_ONLY_BACK_EDGES: frozenset[tuple[str, str]] = frozenset()

#: Modules that may import another package's private modules, and why.  Only the benchmark of
#: apgaspy's control messages: the private records and codec are what it measures.
PRIVATE_IMPORTERS: dict[str, str] = {
    "benchmarks.control_messages": "measures apgaspy._messages against the former string names",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, module: str, is_package: bool, modules: set[str], *,
             type_checking: bool = True) -> set[str]:
    """The absolute names of the modules that ``module``'s source imports (``modules``: the
    names that are modules, for ``from package import module``); with ``type_checking``
    false, those under ``if TYPE_CHECKING:`` are left out (the imports that run)."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not type_checking:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:  # ``from . import _launch`` imports a module, not ``.``
                found.add(f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in modules
                          else prefix)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def module_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES, *,
                 type_checking: bool = True) -> dict[str, set[str]]:
    """Module name → the modules of ``packages`` it imports (the package ``__init__`` modules
    included as nodes of their own); ``type_checking``: as :func:`_imports`."""
    sources = {_module_name(p): p for pkg in packages for p in (root / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in sources.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[name] = {m for m in _imports(tree, name, path.name == "__init__.py", set(sources),
                                           type_checking=type_checking)
                       if m in sources and m != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as a list of nodes (the first repeated at the end), or ``None``."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = dfs(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = dfs(node)
            if cycle:
                return cycle
    return None


def test_find_cycle_finds_a_cycle_and_accepts_a_tree() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_imports_found_in_functions_and_under_type_checking() -> None:
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .x import X\n"
           "def f():\n    from .y import g\n    from . import z\n")
    modules = {"pkg", "pkg.x", "pkg.y", "pkg.z"}
    found = _imports(ast.parse(src), "pkg.mod", False, modules)
    assert {m for m in found if m.startswith("pkg")} == {"pkg.x", "pkg.y", "pkg.z"}
    found = _imports(ast.parse(src), "pkg.mod", False, modules, type_checking=False)
    assert {m for m in found if m.startswith("pkg")} == {"pkg.y", "pkg.z"}


def test_every_module_imports() -> None:
    import importlib

    names = sorted(module_graph())
    assert len(names) >= 30  # the graph found the packages
    for name in names:
        assert importlib.import_module(name).__name__ == name


def test_no_import_cycle_among_the_packages_modules() -> None:
    graph = module_graph(type_checking=False)
    assert "apgaspy._runtime" in graph and "glb._worker" in graph
    assert "scheduler.loop" in graph and "apgaspy.wire.protocol" in graph
    assert find_cycle(graph) is None


def test_no_import_cycle_even_for_the_type_checker() -> None:
    graph = module_graph()
    for a, b in TYPE_ONLY_BACK_EDGES:
        assert b in graph[a], f"{a} no longer imports {b}: take it off TYPE_ONLY_BACK_EDGES"
        graph[a].discard(b)
    assert find_cycle(graph) is None


def test_the_product_imports_neither_the_benchmarks_nor_the_tests() -> None:
    graph = module_graph(packages=(*PRODUCT, "benchmarks", "tests"))
    offenders = sorted(
        (name, m) for name, imported in graph.items()
        if name.split(".")[0] in PRODUCT for m in imported
        if m.split(".")[0] in ("benchmarks", "tests"))
    assert offenders == []


def test_import_scheduler_loads_the_pure_core_only() -> None:
    import subprocess
    import sys

    code = ("import sys, scheduler; print(sorted(m for m in sys.modules if m in "
            "('scheduler.server', 'scheduler.simulate', 'scheduler.nodes', 'psutil', "
            "'sqlite3', 'socket')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_imports_another_packages_private_module(package: str) -> None:
    offenders = []
    for name, imported in module_graph().items():
        if not name.startswith(package) or name in PRIVATE_IMPORTERS:
            continue
        for m in imported:
            top = m.split(".")[0]
            private = any(part.startswith("_") for part in m.split(".")[1:])
            if top != package and private:
                offenders.append((name, m))
    assert offenders == []


# ------------------------------------------------------------------ the wire protocol's leaf

#: The leaf package of the wire protocol: everything above it takes the protocol's text here.
WIRE = "apgaspy.wire"


def _in_wire(module: str) -> bool:
    return module == WIRE or module.startswith(WIRE + ".")


def test_the_wire_package_imports_the_standard_library_alone() -> None:
    sources = {_module_name(p): p for p in (ROOT / "apgaspy" / "wire").rglob("*.py")}
    assert {f"{WIRE}.protocol", f"{WIRE}.auth", f"{WIRE}.framing"} <= set(sources)
    offenders = []
    for name, path in sorted(sources.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for m in _imports(tree, name, path.name == "__init__.py", set(sources)):
            if not (_in_wire(m) or m.split(".")[0] in sys.stdlib_module_names):
                offenders.append((name, m))
    assert offenders == []


def test_import_of_the_wire_package_loads_no_runtime() -> None:
    import subprocess

    code = ("import sys, apgaspy.wire.protocol, apgaspy.wire.auth, apgaspy.wire.framing; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('apgaspy', 'glb', "
            "'communicators', 'scheduler', 'zmq', 'mpi4py', 'cloudpickle', 'psutil') "
            "and m != 'apgaspy' and not m.startswith('apgaspy.wire')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


#: A string that spells a line of the wire protocol (docs/reference/protocol.md): a timing
#: line's kind, an evolving line, or a notification that is one of the job's announcements.
PROTOCOL_LINE = re.compile(
    r"Time(APGAS|GLB)\b|Evolving;|^APGAS-(Ready|Disabled|Rigid)([;:]|$)|^(shrink|grow) \{")


def protocol_lines(source: str) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each string of ``source`` (a module's text) that spells a
    protocol line (:data:`PROTOCOL_LINE`); an f-string is read with ``{}`` for each of its
    fields; docstrings and other bare strings (documentation) are not read."""
    tree = ast.parse(source)
    skip: set[int] = set()
    for node in ast.walk(tree):
        for st in getattr(node, "body", []) if isinstance(getattr(node, "body", None),
                                                           list) else []:
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
                skip.add(id(st.value))
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}"
                           for v in node.values)
            if PROTOCOL_LINE.search(text):
                yield node.lineno, text
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in skip and PROTOCOL_LINE.search(node.value)):
            yield node.lineno, node.value


def test_protocol_lines_are_found_in_code_and_not_in_documentation() -> None:
    src = ('"""Sends shrinkTimeAPGAS;<n>;<ns> and APGAS-Ready."""\n'
           'def f(phase, n):\n'
           '    """Evolving;Request;1"""\n'
           '    send(f"{phase}TimeGLB;{n};0")\n'
           '    send("APGAS-Ready")\n'
           '    send(f"shrink {n}\\n")\n'
           '    log("start to APGAS-Ready in seconds")\n'
           '    return "Evolving;" + "Release"\n')
    assert [line for line, _ in protocol_lines(src)] == [4, 6, 5, 8]


def test_no_product_module_outside_the_wire_package_spells_a_protocol_line() -> None:
    offenders = []
    for pkg in PRODUCT:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            name = _module_name(path)
            if _in_wire(name):
                continue
            offenders += [(name, line, text) for line, text in
                          protocol_lines(path.read_text(encoding="utf-8"))]
    assert offenders == []


# ------------------------------------------------------------------ errors

#: Each package's exceptions module, where all of its error classes are defined.
EXCEPTIONS_MODULES = {
    "apgaspy": "apgaspy._exceptions",
    WIRE: "apgaspy.wire._exceptions",
    "glb": "glb._exceptions",
    "scheduler": "scheduler._exceptions",
    "communicators": "communicators._exceptions",  # none yet: it raises apgaspy's errors
}


def test_every_error_class_lives_in_its_packages_exceptions_module() -> None:
    import importlib

    graph = module_graph(packages=PRODUCT)
    misplaced = []
    for name in sorted(graph):
        package = WIRE if _in_wire(name) else name.split(".")[0]
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, BaseException)
                    and value.__module__ == name and name != EXCEPTIONS_MODULES[package]):
                misplaced.append(f"{name}.{value.__qualname__}")
    assert misplaced == []

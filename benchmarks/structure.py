"""Structure measures of ``src/chatmemory``: sizes, import circles, layering, backend shapes, docstrings.

    python benchmarks/structure.py

Read with the stdlib ``ast`` only (nothing is imported). An import is ``top`` (runs when its module is
imported, class bodies and ``try``/``if`` at module level included), ``function`` (inside a function) or
``type`` (under ``if TYPE_CHECKING``); it points at the most specific chatmemory module it names (``from
a.b import c`` points at ``a.b.c`` when that is a module). Parent packages an import runs are not edges.
Circles are the strongly connected groups of that graph, each with one shortest cycle. Printed: the
figures as tables, then the rules that hold today (``tests/test_structure.py`` keeps them) beside those
that do not. Figures only: not run in CI.
"""

from __future__ import annotations

import ast
import inspect
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = SRC / "chatmemory"
LAYERING_TEST = ROOT / "tests" / "stores" / "test_layering.py"
BACKENDS = ["redis", "sql", "mongodb", "langchain4j_redis"]
SHAPE = (
    "__init__.py",
    "base.py",
    "plan.py",
    "commands.py",
    "outcomes.py",
    "operations.py",
    "executor.py",
    "aio.py",
    "store.py",
)
"""The modules every backend folder has, with the same roles (docs/architecture.md)."""
MAX_MODULE_LINES = 600
MAX_DOCSTRING_LINES = 12
KINDS = ("top", "function", "type")


@dataclass(frozen=True)
class Import:
    """One import of a chatmemory module by another, as the source names it."""

    source: str
    target: str
    kind: str  # top, function or type
    line: int


@dataclass
class Module:
    """One module of the package: its name, file, line count, docstring and imports of chatmemory."""

    name: str
    path: Path
    lines: int
    is_package: bool
    docstring_lines: int
    group: str  # the folder the module sits in, relative to the package (``.`` for its top)
    imports: list[Import] = field(default_factory=list)
    tree: ast.Module | None = None


def module_name(path: Path, src: Path = SRC) -> str:
    """The dotted name of the module at ``path`` under ``src`` (a package's ``__init__.py`` is the package)."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def load_modules(package: Path = PACKAGE) -> dict[str, Module]:
    """Every ``.py`` module under ``package`` (``src/chatmemory``, migration scripts included), parsed."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        docstring = ast.get_docstring(tree, clean=False)
        name = module_name(path, package.parent)
        found[name] = Module(
            name=name,
            path=path,
            lines=len(text.splitlines()),
            is_package=path.name == "__init__.py",
            docstring_lines=len(inspect.cleandoc(docstring).strip().splitlines()) if docstring else 0,
            group=path.parent.relative_to(package).as_posix(),
            tree=tree,
        )
    for module in found.values():
        module.imports = list(_imports(module, found))
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, kind: str) -> Iterable[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import under ``node`` with its kind, the innermost context deciding (a function wins)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, kind
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _walk(child, "function")
        elif isinstance(child, ast.If) and _is_type_checking(child.test) and kind == "top":
            for statement in child.body:
                yield from _walk(ast.Module(body=[statement], type_ignores=[]), "type")
            for statement in child.orelse:
                yield from _walk(ast.Module(body=[statement], type_ignores=[]), "top")
        else:
            yield from _walk(child, kind)


def _resolve(name: str, modules: dict[str, Module]) -> str | None:
    """The longest prefix of ``name`` that is a chatmemory module, if any."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _imports(module: Module, modules: dict[str, Module]) -> Iterable[Import]:
    assert module.tree is not None
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    for node, kind in _walk(module.tree, "top"):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for name in dict.fromkeys(names):
            target = _resolve(name, modules)
            if target is not None and target != module.name:
                yield Import(module.name, target, kind, node.lineno)


def graph(modules: dict[str, Module], kinds: Iterable[str]) -> dict[str, set[str]]:
    """The import graph made of the imports of ``kinds``."""
    wanted = set(kinds)
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for module in modules.values():
        for edge in module.imports:
            if edge.kind in wanted:
                edges[module.name].add(edge.target)
    return edges


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of two or more modules that import each other, directly or round about (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        # Iterative depth-first search: (node, iterator over its successors).
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def shortest_cycle(edges: dict[str, set[str]], group: list[str]) -> list[str]:
    """One shortest cycle through the group's first module, within the group (breadth first)."""
    members = set(group)
    start = group[0]
    parents: dict[str, str] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        node = queue.popleft()
        for successor in sorted(edges[node] & members):
            if successor == start:
                path = [node]
                while path[-1] != start:
                    path.append(parents[path[-1]])
                return [*reversed(path), start]
            if successor not in seen:
                seen.add(successor)
                parents[successor] = node
                queue.append(successor)
    raise AssertionError(f"no cycle through {start}")


def circles(modules: dict[str, Module], kinds: Iterable[str]) -> list[tuple[list[str], list[str]]]:
    """Each circle of the graph of ``kinds``: its modules and one shortest cycle."""
    edges = graph(modules, kinds)
    return [(group, shortest_cycle(edges, group)) for group in strongly_connected(edges)]


def is_core(name: str) -> bool:
    """Whether ``name`` is in the core (``chatmemory.core`` and below)."""
    return name == "chatmemory.core" or name.startswith("chatmemory.core.")


def errors_only(module: Module) -> bool:
    """Whether a module defines nothing but exception classes (and imports and constants)."""
    assert module.tree is not None
    classes = [node for node in module.tree.body if isinstance(node, ast.ClassDef)]
    functions = [node for node in module.tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not classes or functions:
        return False
    for node in classes:
        bases = [ast.unparse(base).rpartition(".")[2] for base in node.bases]
        if not any(base.endswith(("Error", "Exception", "Warning")) for base in bases):
            return False
    return True


def core_upward_imports(modules: dict[str, Module]) -> list[Import]:
    """Imports from a core module of a chatmemory module outside the core (errors-only modules excepted)."""
    found = [
        edge
        for module in modules.values()
        if is_core(module.name)
        for edge in module.imports
        if not is_core(edge.target) and not errors_only(modules[edge.target])
    ]
    return sorted(found, key=lambda edge: (edge.source, edge.target, edge.kind))


def backend_files() -> dict[str, list[str]]:
    """The ``.py`` file names of each backend package under ``stores``."""
    return {backend: sorted(path.name for path in (PACKAGE / "stores" / backend).glob("*.py")) for backend in BACKENDS}


def missing_from_shape() -> dict[str, list[str]]:
    """Per backend, the modules of :data:`SHAPE` its folder lacks."""
    return {backend: [name for name in SHAPE if name not in names] for backend, names in backend_files().items()}


def long_docstrings(modules: dict[str, Module]) -> list[Module]:
    """The modules whose docstring has more than ``MAX_DOCSTRING_LINES`` lines of text."""
    return sorted(
        (module for module in modules.values() if module.docstring_lines > MAX_DOCSTRING_LINES),
        key=lambda module: (-module.docstring_lines, module.name),
    )


def layering_allow_list() -> dict[str, int]:
    """The sizes of the literals that ``tests/stores/test_layering.py`` assigns to its module-level names.

    ``DRIVER_MODULES`` is the allow-list (the modules that may import a database driver); ``DRIVERS`` the
    drivers it hides. A test that stopped defining them as literals fails here rather than counting wrong.
    """
    tree = ast.parse(LAYERING_TEST.read_text(encoding="utf-8"))
    sizes = {}
    for node in tree.body:
        target: ast.expr
        value: ast.expr | None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, (ast.Set, ast.List, ast.Tuple)):
            sizes[target.id] = len(value.elts)
    for name in ("DRIVER_MODULES", "DRIVERS"):
        if name not in sizes:
            raise SystemExit(f"{LAYERING_TEST}: no literal {name} (the test defines its allow-list differently now)")
    return sizes


def _table(headers: list[str], rows: list[list[object]]) -> str:
    cells = [headers, *[[str(cell) for cell in row] for row in rows]]
    widths = [max(len(row[column]) for row in cells) for column in range(len(headers))]
    lines = []
    for number, row in enumerate(cells):
        lines.append(
            "  ".join(
                cell.rjust(width) if _numeric(cell) else cell.ljust(width)
                for cell, width in zip(row, widths, strict=True)
            )
        )
        if number == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def _numeric(cell: str) -> bool:
    return cell.replace(".", "", 1).isdigit()


def main() -> None:
    modules = load_modules()
    total = sum(module.lines for module in modules.values())
    print(f"src/chatmemory: {len(modules)} modules, {total} lines of Python\n")

    groups: dict[str, list[Module]] = {}
    for module in modules.values():
        groups.setdefault(module.group, []).append(module)
    rows: list[list[object]] = []
    for name, members in sorted(groups.items(), key=lambda item: -sum(module.lines for module in item[1])):
        largest = max(members, key=lambda module: module.lines)
        rows.append(
            [
                name,
                len(members),
                sum(module.lines for module in members),
                f"{largest.path.name} ({largest.lines})",
            ]
        )
    print("== lines per package (folder under src/chatmemory)")
    print(_table(["package", "modules", "lines", "largest module"], rows))

    print("\n== imports of chatmemory modules by kind")
    counts = {kind: sum(1 for m in modules.values() for edge in m.imports if edge.kind == kind) for kind in KINDS}
    print(_table(["kind", "imports"], [[kind, counts[kind]] for kind in KINDS]))

    found_circles = {
        "top-level imports": circles(modules, ["top"]),
        "top-level + function-level imports": circles(modules, ["top", "function"]),
    }
    for title, found in found_circles.items():
        print(f"\n== import circles over {title}: {len(found)}")
        for group, cycle in found:
            print(f"  {len(group)} modules: {', '.join(group)}")
            print(f"    e.g. {' -> '.join(cycle)}")

    upward = core_upward_imports(modules)
    exempt = sorted(
        {
            edge.target
            for module in modules.values()
            if is_core(module.name)
            for edge in module.imports
            if not is_core(edge.target) and errors_only(modules[edge.target])
        }
    )
    print(f"\n== imports from chatmemory.core to modules above it: {len(upward)}")
    print(f"  errors-only modules excepted: {', '.join(exempt) if exempt else 'none imported by core'}")
    if upward:
        print(
            _table(["core module", "imports", "kind", "line"], [[e.source, e.target, e.kind, e.line] for e in upward])
        )

    files = backend_files()
    missing = missing_from_shape()
    print(f"\n== file names per backend folder (missing: of {', '.join(SHAPE)})")
    rows = [[backend, len(names), ", ".join(missing[backend]) or "-"] for backend, names in files.items()]
    print(_table(["backend", "files", "missing"], rows))
    for backend, names in files.items():
        print(f"  {backend}: {', '.join(names)}")
    shared = sorted(set.intersection(*(set(names) for names in files.values())))
    print(f"  in all four: {', '.join(shared)}")

    long = long_docstrings(modules)
    print(f"\n== module docstrings over {MAX_DOCSTRING_LINES} lines of text: {len(long)}")
    if long:
        print(_table(["module", "docstring lines"], [[module.name, module.docstring_lines] for module in long]))

    sizes = layering_allow_list()
    print("\n== tests/stores/test_layering.py")
    print(
        _table(
            ["literal", "entries"],
            [["DRIVER_MODULES (may import a driver)", sizes["DRIVER_MODULES"]], ["DRIVERS", sizes["DRIVERS"]]],
        )
    )

    oversized = sorted((m for m in modules.values() if m.lines > MAX_MODULE_LINES), key=lambda m: -m.lines)
    largest = max(modules.values(), key=lambda module: module.lines)
    rules = [
        (f"no module over {MAX_MODULE_LINES} lines", not oversized, f"largest {largest.name} ({largest.lines})"),
        ("no import circle over top-level imports", not found_circles["top-level imports"], ""),
        ("no import circle, function-level imports too", not found_circles["top-level + function-level imports"], ""),
        ("no import from core to above it (any kind)", not upward, f"{len(upward)} imports"),
        (
            "no top-level import from core to above it",
            not [e for e in upward if e.kind == "top"],
            f"{sum(1 for e in upward if e.kind == 'top')} imports",
        ),
        (f"no module docstring over {MAX_DOCSTRING_LINES} lines", not long, f"{len(long)} modules"),
        (
            "every backend folder has the shape's modules",
            not any(missing.values()),
            f"{sum(map(len, missing.values()))} missing",
        ),
    ]
    print("\n== rules (kept by tests/test_structure.py when they hold)")
    print(
        _table(["rule", "holds today", "figure"], [[rule, "yes" if ok else "no", figure] for rule, ok, figure in rules])
    )


if __name__ == "__main__":
    main()

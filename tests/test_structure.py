"""The structure rules of ``src/chatmemory`` that hold today and must keep holding.

The measures are ``benchmarks/structure.py``'s (read with ``ast``, nothing imported); it prints these
rules beside the ones that do not hold yet, which stay figures there until they hold and move here.
Each rule is also run on a small package written for it, where it fails.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "structure.py"


@pytest.fixture(scope="module")
def structure() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chatmemory_structure", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while they are built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def modules(structure: ModuleType) -> dict[str, Any]:
    found: dict[str, Any] = structure.load_modules()
    # The walk found the package: an empty or partial one would pass every rule below.
    assert "chatmemory.core.window_memory" in found and "chatmemory.stores.sql.store" in found
    assert len(found) > 100
    return found


def test_no_module_is_over_600_lines(structure: ModuleType, modules: dict[str, Any]) -> None:
    over = {name: m.lines for name, m in modules.items() if m.lines > structure.MAX_MODULE_LINES}
    assert over == {}


def test_no_import_circle_through_top_level_imports(structure: ModuleType, modules: dict[str, Any]) -> None:
    # What runs at import: a circle here makes the import order matter.
    assert structure.circles(modules, ["top"]) == []


def test_no_import_circle_through_function_level_imports_either(structure: ModuleType, modules: dict[str, Any]) -> None:
    # A circle hidden in a function is still two modules that cannot be read one before the other.
    assert structure.circles(modules, ["top", "function"]) == []


def test_core_imports_nothing_above_it(structure: ModuleType, modules: dict[str, Any]) -> None:
    # Retry, the optional-dependency helper and the default store's hook live in core; telemetry observes
    # retries by registering with core.retry, and the in-memory store registers itself as the default.
    assert [(edge.source, edge.target, edge.kind) for edge in structure.core_upward_imports(modules)] == []


def test_no_module_docstring_is_over_12_lines(structure: ModuleType, modules: dict[str, Any]) -> None:
    # A module docstring says what the module is for; design stories live in docs/.
    assert [(m.name, m.docstring_lines) for m in structure.long_docstrings(modules)] == []


def test_every_backend_folder_has_the_shape_s_modules(structure: ModuleType) -> None:
    # plan, commands, outcomes, operations, executor, aio, store (and base): one role per file name.
    assert structure.missing_from_shape() == {backend: [] for backend in structure.BACKENDS}


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "src" / "chatmemory" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "src" / "chatmemory"


def test_the_rules_fail_on_a_package_that_breaks_them(structure: ModuleType, tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from chatmemory import b\n",
            "b.py": "from .c import name\n",
            "c.py": "import chatmemory.a\n\nname = 1\n" + "x = 1\n" * 600,
            "d.py": "def f():\n    from chatmemory import a\n",
            "e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from chatmemory import d\n",
            "g.py": "def f():\n    from chatmemory import h\n",
            "h.py": "import chatmemory.g\n",
            "core/__init__.py": '"""The core."""\n',
            "core/f.py": '"""A docstring\n' + "of many lines\n" * 12 + '"""\n\nfrom chatmemory import a\n',
        },
    )
    found = structure.load_modules(package)
    assert [(group, cycle) for group, cycle in structure.circles(found, ["top"])] == [
        (
            ["chatmemory.a", "chatmemory.b", "chatmemory.c"],
            ["chatmemory.a", "chatmemory.b", "chatmemory.c", "chatmemory.a"],
        )
    ]
    assert [m.name for m in found.values() if m.lines > structure.MAX_MODULE_LINES] == ["chatmemory.c"]
    assert [group for group, _ in structure.circles(found, ["top", "function"])] == [
        ["chatmemory.a", "chatmemory.b", "chatmemory.c"],
        ["chatmemory.g", "chatmemory.h"],
    ]
    kinds = {(edge.source, edge.target): edge.kind for m in found.values() for edge in m.imports}
    assert kinds[("chatmemory.d", "chatmemory.a")] == "function"
    assert kinds[("chatmemory.e", "chatmemory.d")] == "type"
    assert [(edge.source, edge.target) for edge in structure.core_upward_imports(found)] == [
        ("chatmemory.core.f", "chatmemory.a")
    ]
    assert [m.name for m in structure.long_docstrings(found)] == ["chatmemory.core.f"]

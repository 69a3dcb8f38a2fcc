"""The extras: ``[all]`` holds every extra the README and docs name, and each one they name exists.

Read from pyproject.toml itself, so an extra added without a place in ``all`` (or a page naming an extra
that pyproject does not define) fails here rather than on a user's machine.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION = "llm-window-memory"
# Extras for working on chatmemory itself, not for using it.
NOT_IN_ALL = {"all", "test", "dev", "docs"}


def extras() -> dict[str, list[str]]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        project = tomllib.load(file)["project"]
    assert project["name"] == DISTRIBUTION
    found: dict[str, list[str]] = project["optional-dependencies"]
    return found


def expand(extra: str, table: dict[str, list[str]]) -> set[str]:
    """``extra`` and every extra of this distribution it pulls in, recursively."""
    seen = {extra}
    for requirement in table[extra]:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement)
        assert name is not None, requirement
        if name.group(0).lower() == DISTRIBUTION:
            inner = requirement[requirement.index("[") + 1 : requirement.index("]")]
            for part in inner.split(","):
                assert part in table, f"{extra} pulls in [{part}], which pyproject does not define"
                seen |= expand(part, table)
    return seen


def named_on_pages() -> set[str]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    names: set[str] = set()
    for page in pages:
        text = page.read_text(encoding="utf-8")
        # pip install 'llm-window-memory[x]', pip install '.[x]', a wheel's '….whl[x]', "the `x` extra".
        for group in re.findall(r"(?:llm-window-memory|\.|\.whl)\[([a-z0-9,-]+)\]", text):
            names.update(group.split(","))
        names.update(re.findall(r"the `([a-z0-9-]+)` extra", text))
    return names


def test_all_holds_every_extra_but_the_ones_for_working_on_chatmemory() -> None:
    table = extras()
    assert expand("all", table) >= set(table) - NOT_IN_ALL


def test_every_extra_a_page_names_exists_and_is_in_all() -> None:
    table = extras()
    named = named_on_pages()
    assert {"redis", "langchain", "openai-agents", "otel", "pydantic-ai"} <= named
    assert named <= set(table), f"pages name extras pyproject lacks: {sorted(named - set(table))}"
    assert named - NOT_IN_ALL <= expand("all", table)


def test_an_extra_left_out_of_all_is_found() -> None:
    table = {**extras(), "all": [f"{DISTRIBUTION}[redis]"]}
    assert not expand("all", table) >= set(table) - NOT_IN_ALL

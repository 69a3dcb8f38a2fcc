"""``chatmemory --help`` and every command's help point to the command's section of docs/cli.md, which exists."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import chatmemory.cli
from chatmemory.cli.app import cli

# As main() does: importing the command modules registers their commands on the group.
for _module in pkgutil.iter_modules(chatmemory.cli.__path__):
    if _module.name.endswith("_commands"):
        importlib.import_module(f"chatmemory.cli.{_module.name}")

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def anchors(markdown: str) -> set[str]:
    """The ids MkDocs gives the headings of ``markdown`` (its toc slugify: lower case, words joined by '-')."""
    headings = re.findall(r"^#{1,6} +(.+?) *$", markdown, flags=re.MULTILINE)
    words = (re.sub(r"[^\w\s-]", "", heading).strip().lower() for heading in headings)
    return {re.sub(r"[-\s]+", "-", heading) for heading in words}


def pointer(help_text: str) -> str:
    match = re.search(r"^ *Guide: docs/cli\.md(#[\w-]+)?$", help_text, flags=re.MULTILINE)
    assert match, help_text
    return (match.group(1) or "#").removeprefix("#")


def test_the_group_help_points_to_the_guide() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    assert pointer(result.output) == ""
    assert "(on the docs site: cli/)" in result.output


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_each_command_help_points_to_its_section(name: str) -> None:
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    anchor = pointer(result.output)
    assert anchor == f"chatmemory-{name}"
    assert anchor in anchors(GUIDE.read_text(encoding="utf-8")), f"docs/cli.md has no section '## chatmemory {name}'"
    assert f"(on the docs site: cli/#{anchor})" in result.output


def test_anchors_follow_the_toc_slugs() -> None:
    assert anchors("# The `chatmemory` command\n## chatmemory trim-history\n") == {
        "the-chatmemory-command",
        "chatmemory-trim-history",
    }

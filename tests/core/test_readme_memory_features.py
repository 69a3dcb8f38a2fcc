"""The "Eviction hooks, summaries and undo" and "History beside the window" examples of
docs/history-hooks-summaries.md run and print what their comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "docs" / "history-hooks-summaries.md"


def section_block(markdown: str, heading: str) -> str:
    section = markdown[markdown.index(heading) :]
    match = re.search(r"^```python\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    assert match, f"no python block after {heading!r}"
    return match.group(1)


def test_the_example_prints_what_it_says() -> None:
    block = section_block(README.read_text(encoding="utf-8"), "## Eviction hooks, summaries and undo")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "README.md", "exec"), {})
    lines = printed.getvalue().splitlines()
    assert lines[0] == "I fly to Lisbon on Friday; I like trams"
    assert "And for Porto?" in lines[1] and lines[1].startswith("[UserMessage(")


def test_the_history_example_prints_what_it_says(tmp_path: Path, monkeypatch) -> None:
    block = section_block(README.read_text(encoding="utf-8"), "## History beside the window")
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "README.md", "exec"), {})
    assert printed.getvalue().splitlines() == ["3", "5 None"]

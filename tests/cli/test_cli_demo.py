"""``chatmemory demo`` (in-process and as ``python -m chatmemory``), ``--help``, ``--version`` and ``migrate``."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from chatmemory import InMemoryChatMemoryStore, MessageWindowChatMemory, SystemMessage, ToolExecutionResultMessage
from chatmemory.cli import main
from chatmemory.demo import DEFAULT_STORE_URL, run_demo

ROW = re.compile(r"^\s+(?P<index>\d+|x)\s+(?P<role>system|user|ai -> tools|ai|tool result|custom)\s+(?P<text>.*)$")
CALL_ID = re.compile(r"\[(call_\d+)\]")


def turns(output: str) -> list[list[tuple[str, str, str]]]:
    """The table rows (index or 'x', role, text) printed after each turn."""
    blocks: list[list[tuple[str, str, str]]] = []
    for block in output.split("\nTurn ")[1:]:
        rows = []
        for line in block.splitlines()[2:]:
            match = ROW.match(line)
            if match:
                rows.append((match["index"], match["role"], match["text"]))
        blocks.append(rows)
    return blocks


def check_demo_output(output: str, max_messages: int) -> None:
    blocks = turns(output)
    assert len(blocks) == 5
    evicted_any = False
    together = 0
    for rows in blocks:
        window = [row for row in rows if row[0] != "x"]
        evicted = [row for row in rows if row[0] == "x"]
        evicted_any = evicted_any or bool(evicted)
        assert [int(row[0]) for row in window] == list(range(len(window)))
        assert len(window) <= max_messages
        assert window[0][1] == "system"
        assert all("<- evicted" in row[2] for row in evicted)
        calls_in_window = {i for row in window if row[1] == "ai -> tools" for i in CALL_ID.findall(row[2])}
        results_in_window = {i for row in window if row[1] == "tool result" for i in CALL_ID.findall(row[2])}
        evicted_calls = {i for row in evicted if row[1] == "ai -> tools" for i in CALL_ID.findall(row[2])}
        evicted_results = {i for row in evicted if row[1] == "tool result" for i in CALL_ID.findall(row[2])}
        # A call and its result leave the window together, and no result stays without its call.
        assert results_in_window <= calls_in_window
        assert evicted_calls <= evicted_results
        assert not (evicted_calls & results_in_window)
        together += len(evicted_calls & evicted_results)
    assert evicted_any
    assert together >= 2
    assert "<- evicted" in output


@pytest.fixture(autouse=True)
def _in_a_scratch_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The demo's default store is a file in the current directory.
    monkeypatch.chdir(tmp_path)


def test_demo_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    output = capsys.readouterr().out
    check_demo_output(output, 6)
    assert "tool calls evicted together with their results: call_1" in output
    assert "Continuing" not in output


@pytest.mark.parametrize("max_messages", [3, 4, 10])
def test_demo_window_sizes(capsys: pytest.CaptureFixture[str], max_messages: int) -> None:
    assert main(["demo", "--max-messages", str(max_messages), "--memory-id", "trip-42"]) == 0
    output = capsys.readouterr().out
    assert "'trip-42'" in output
    blocks = turns(output)
    assert all(len([r for r in rows if r[0] != "x"]) <= max_messages for rows in blocks)
    if max_messages < 10:
        check_demo_output(output, max_messages)


def test_demo_as_module_subprocess() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "chatmemory", "demo", "--store", "memory://"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""
    check_demo_output(completed.stdout, 6)


def test_second_run_continues_the_first() -> None:
    store = InMemoryChatMemoryStore()
    first, second = io.StringIO(), io.StringIO()
    assert run_demo(store, memory_id="m", max_messages=6, out=first) == 0
    stored = store.get_messages("m")
    assert "Continuing" not in first.getvalue()
    assert run_demo(store, memory_id="m", max_messages=6, out=second) == 0
    assert "Continuing an earlier conversation: 6 messages already in the store." in second.getvalue()
    window = MessageWindowChatMemory("m", max_messages=6, store=store).messages()
    assert window[0] == stored[0]
    assert isinstance(window[0], SystemMessage)
    assert len(window) == 6
    ids = [m.id for m in window if isinstance(m, ToolExecutionResultMessage)]
    assert len(ids) == len(set(ids))


def test_default_store_is_a_sqlite_file_that_a_second_run_continues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert DEFAULT_STORE_URL == "sqlite:///chatmemory-demo.sqlite3"
    monkeypatch.chdir(tmp_path)
    assert main(["demo"]) == 0
    assert "Continuing" not in capsys.readouterr().out
    assert (tmp_path / "chatmemory-demo.sqlite3").exists()
    assert main(["demo"]) == 0
    assert "Continuing an earlier conversation: 6 messages already in the store." in capsys.readouterr().out


def test_help_version_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    for command in ("demo", "migrate", "ls", "show", "export", "import", "copy", "delete", "purge-expired", "stats"):
        assert command in text
    assert main(["--version"]) == 0
    assert re.fullmatch(r"chatmemory \d+\.\d+\.\d+\S* \(llm-window-memory\)\n", capsys.readouterr().out)
    assert main(["demo", "--help"]) == 0
    assert "--store" in capsys.readouterr().out
    assert main(["demo", "--max-messages", "0"]) == 2
    assert "0 is not in the range x>=1" in capsys.readouterr().err
    assert main(["nonsense"]) == 2
    assert "No such command 'nonsense'" in capsys.readouterr().err
    assert main([]) == 2
    assert "demo" in capsys.readouterr().err


def test_bad_store_url_and_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--store", "nosuchscheme://x"]) == 2
    assert "nosuchscheme" in capsys.readouterr().err
    assert main(["demo", "--memory-id", ""]) == 2
    assert "empty" in capsys.readouterr().err


def test_migrate_without_the_module(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "chatmemory.migrations", None)
    assert main(["migrate", "sqlite:///nowhere.db"]) == 2
    err = capsys.readouterr().err
    assert "migrations are not available" in err
    assert "pip install 'llm-window-memory[sql]'" in err


@pytest.mark.sqlite
def test_migrate_a_sqlite_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("sqlalchemy")
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    assert main(["migrate", url]) == 0
    assert main(["migrate", url]) == 0
    out = capsys.readouterr().out
    assert "already" in out


def test_console_script_is_declared() -> None:
    scripts = {ep.name: ep.value for ep in entry_points(group="console_scripts")}
    assert scripts.get("chatmemory") == "chatmemory.cli:main"

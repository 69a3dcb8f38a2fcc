"""``chatmemory demo --summarize``: a SummarizingChatMemory with the toy summarizer, no model, no network."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from chatmemory import (
    AiMessage,
    InMemoryChatMemoryStore,
    SummarizingChatMemory,
    SystemMessage,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.cli import main
from chatmemory.core.summary import is_summary, summary_text
from chatmemory.demo import run_demo, toy_summarizer

CALL_ID = re.compile(r"\[(call_\d+)\]")


def blocks(output: str) -> list[list[str]]:
    return [block.splitlines()[2:] for block in output.split("\nTurn ")[1:]]


@pytest.fixture(autouse=True)
def _in_a_scratch_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_demo_summarize_keeps_what_leaves_in_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--summarize", "--store", "memory://"]) == 0
    output = capsys.readouterr().out
    assert "summarizing what leaves it" in output
    turns = blocks(output)
    assert len(turns) == 5
    for rows in turns[1:]:
        window = [row for row in rows if row.split() and row.split()[0].isdigit()]
        assert window[0].split()[1] == "system"
        assert window[1].split()[1] == "summary", "the summary sits right after the system message"
        assert len(window) <= 6
        # No tool result in the window without its call: pairs leave together into the summary.
        calls = {i for row in window if "ai -> tools" in row for i in CALL_ID.findall(row)}
        results = {i for row in window if "tool result" in row for i in CALL_ID.findall(row)}
        assert results <= calls
    assert "<- summarized" in output and "<- evicted" not in output
    assert "asked: I'm flying to Lisbon on Friday" in output
    assert "Your first question is in my summary" in output


def test_a_second_run_reads_the_summary_from_the_store() -> None:
    store = InMemoryChatMemoryStore()
    first, second = io.StringIO(), io.StringIO()
    assert run_demo(store, memory_id="m", summarize=True, out=first) == 0
    summary = next(m for m in store.get_messages("m") if is_summary(m))
    assert isinstance(summary, UserMessage)
    assert run_demo(store, memory_id="m", summarize=True, out=second) == 0
    assert "Continuing an earlier conversation" in second.getvalue()
    memory = SummarizingChatMemory("m", max_messages=6, summarizer=toy_summarizer, store=store)
    text = memory.summary()
    assert text is not None and text.startswith(summary_text(summary).split(" | ")[0])
    window = memory.messages()
    assert isinstance(window[0], SystemMessage) and is_summary(window[1])


def test_the_toy_summarizer_keeps_the_first_note_and_the_latest() -> None:
    evicted = [UserMessage(f"question {i}") for i in range(10)]
    evicted.append(AiMessage("answer"))
    evicted.append(ToolExecutionResultMessage("c", "get_weather", "sunny"))
    notes = toy_summarizer(None, evicted).split(" | ")
    assert notes[0] == "asked: question 0"
    assert notes[-1] == "get_weather: sunny"
    assert len(notes) == 6
    assert toy_summarizer("asked: x", []) == "asked: x"

"""10,000 memories through export → import → copy, with every count checked.

The in-memory store is the source (seeding it costs nothing) and a real Redis the store in the middle, so
the test measures the commands, not the seeding, and stays within seconds on a small machine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from chatmemory import AiMessage, ChatMemoryStore, InMemoryChatMemoryStore, SystemMessage, UserMessage
from chatmemory.cli import main
from support.backends.redis import open_backend

COUNT = 10_000


@pytest.mark.redis
def test_ten_thousand_memories_export_import_copy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    backend = open_backend()
    source = InMemoryChatMemoryStore()
    middle = backend.make_store()
    target = InMemoryChatMemoryStore()
    stores: dict[str, ChatMemoryStore] = {
        "memory://source": source,
        "redis://middle": middle,
        "memory://target": target,
    }

    @contextlib.contextmanager
    def opener(url: str, options: Mapping[str, Any]) -> Iterator[ChatMemoryStore]:
        yield stores[url]

    def run(*argv: str) -> str:
        status = main(list(argv), open_store=opener)
        err = capsys.readouterr().err
        assert status == 0, err
        return err

    try:
        system = SystemMessage("You are a travel assistant.")
        for n in range(COUNT):
            source.update_messages(f"user-{n:05d}", [system, UserMessage(f"question {n}"), AiMessage(f"answer {n}")])
        path = tmp_path / "all.jsonl"
        assert run("export", "memory://source", "-o", str(path)) == f"chatmemory export: {COUNT} exported ({path})\n"
        assert len(path.read_bytes().splitlines()) == COUNT
        assert run("import", "redis://middle", str(path)) == f"chatmemory import: {COUNT} created\n"
        assert sum(1 for _ in middle.memory_ids()) == COUNT
        assert run("copy", "redis://middle", "memory://target") == f"chatmemory copy: {COUNT} created\n"
        assert sum(1 for _ in target.memory_ids()) == COUNT
        assert target.get_messages("user-09999") == source.get_messages("user-09999")
        assert target.get_messages("user-00000")[1] == UserMessage("question 0")
    finally:
        backend.close_store(middle)
        backend.close()

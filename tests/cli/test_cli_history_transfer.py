"""``export --history``, ``copy --history`` and ``import`` of lines that carry a history, on every backend.

Every backend's history is read (export, copy); it is restored where the store can restore one
(``SupportsHistoryRestore``), and into an in-memory store with history from every backend.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import orjson
import pytest

from chatmemory import AiMessage, InMemoryChatMemoryStore, SystemMessage, UserMessage
from chatmemory.core.history import MAX_HISTORY_PAGE, SupportsHistoryRestore, UnrestorableHistoryError

IDS = ["talk-1", "talk-2", "talk-3"]


def fill(store, memory_id: str, turns: int = 7) -> None:
    """Turns through a window of 4 (system message kept first): the history holds more than the window."""
    written = [SystemMessage("s")]
    for turn in range(turns):
        written.append(UserMessage(f"{memory_id} q{turn}") if turn % 2 == 0 else AiMessage(f"{memory_id} a{turn}"))
        store.update_messages(memory_id, [written[0], *written[1:][-3:]])


def entries(store, memory_id: str) -> list[tuple[int, object, object]]:
    page = store.history(memory_id, limit=MAX_HISTORY_PAGE)
    assert page.next_after is None
    return [(entry.sequence, entry.written_at, entry.message) for entry in page.entries]


def same_entries(left: list, right: list) -> bool:
    # Stores keep written_at to the millisecond (Redis) or microsecond: compare what both keep.
    def rounded(items: list) -> list:
        return [
            (sequence, written_at.replace(microsecond=written_at.microsecond // 1000), message)
            for sequence, written_at, message in items
        ]

    return rounded(left) == rounded(right)


def restoring(stores, label: str) -> str:
    url = stores.url(label, history=True)
    if not isinstance(stores[url], SupportsHistoryRestore):
        pytest.skip(f"{type(stores[url]).__name__} cannot restore history yet")
    return url


def in_memory(stores, label: str, **options) -> str:
    return stores.add(f"memory://{label}", InMemoryChatMemoryStore(history=True, **options))


@pytest.fixture
def exported(stores, run, tmp_path: Path) -> tuple[str, Path]:
    source = stores.url("source", history=True)
    for memory_id in IDS:
        fill(stores[source], memory_id)
    path = tmp_path / "memories.jsonl"
    result = run("export", source, "--history", "-o", str(path))
    assert result.status == 0, result.err
    return source, path


def test_export_writes_every_history_entry(stores, exported) -> None:
    source, path = exported
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert [line["id"] for line in lines] == IDS
    for line in lines:
        history = line["history"]
        assert len(history) == 8  # the system message and 7 turns, 4 of them evicted from the window
        assert [entry["sequence"] for entry in history] == [entry[0] for entry in entries(stores[source], line["id"])]
        assert history[-1]["message"]["v"] == 1


def test_export_import_round_trip_keeps_window_and_history(stores, run, exported) -> None:
    source, path = exported
    target = restoring(stores, "target")
    imported = run("import", target, str(path))
    assert imported.status == 0, imported.err
    assert f"{len(IDS)} created" in imported.err
    for memory_id in IDS:
        assert stores[target].get_messages(memory_id) == stores[source].get_messages(memory_id)
        assert same_entries(entries(stores[target], memory_id), entries(stores[source], memory_id))
    again = run("import", target, str(path))
    assert again.status == 0, again.err
    assert f"{len(IDS)} unchanged" in again.err
    for memory_id in IDS:
        assert same_entries(entries(stores[target], memory_id), entries(stores[source], memory_id))


def test_a_restored_history_goes_on_after_the_restored_entries(stores, run, exported) -> None:
    source, path = exported
    target = in_memory(stores, "goes-on")
    assert run("import", target, str(path)).status == 0
    stores[target].update_messages("talk-1", [*stores[target].get_messages("talk-1"), UserMessage("later")])
    after = entries(stores[target], "talk-1")
    assert same_entries(after[:-1], entries(stores[source], "talk-1"))
    assert after[-1][0] > after[-2][0] and after[-1][2] == UserMessage("later")


def test_every_backend_history_imports_into_a_store_that_restores(stores, run, exported) -> None:
    source, path = exported
    target = in_memory(stores, "restored")
    imported = run("import", target, str(path))
    assert imported.status == 0, imported.err
    for memory_id in IDS:
        assert stores[target].get_messages(memory_id) == stores[source].get_messages(memory_id)
        assert same_entries(entries(stores[target], memory_id), entries(stores[source], memory_id))


def test_copy_with_history_to_another_backend_and_back(stores, run) -> None:
    source = stores.url("source", history=True)
    for memory_id in IDS:
        fill(stores[source], memory_id)
    middle = in_memory(stores, "middle")
    copied = run("copy", source, middle, "--history")
    assert copied.status == 0, copied.err
    assert f"{len(IDS)} created" in copied.err
    for memory_id in IDS:
        assert same_entries(entries(stores[middle], memory_id), entries(stores[source], memory_id))
    assert "unchanged" in run("copy", source, middle, "--history").err
    back = restoring(stores, "back")
    assert run("copy", middle, back, "--history").status == 0
    for memory_id in IDS:
        assert stores[back].get_messages(memory_id) == stores[source].get_messages(memory_id)
        assert same_entries(entries(stores[back], memory_id), entries(stores[source], memory_id))


def test_an_interrupted_import_run_again_adds_only_what_is_missing(stores, run, exported, tmp_path: Path) -> None:
    source, path = exported
    target = restoring(stores, "target")
    lines = path.read_bytes().splitlines()
    # Stopped after the first memory: the rest is written by the next run, the first left as it is.
    first = tmp_path / "first.jsonl"
    first.write_bytes(lines[0] + b"\n")
    assert run("import", target, str(first)).status == 0
    # A memory whose window is there with only part of its history (written by hand, as a store without
    # atomic restore might have left it): the run adds the missing entries.
    whole = entries(stores[source], "talk-2")
    page = stores[source].history("talk-2", limit=MAX_HISTORY_PAGE).entries
    window = stores[source].get_messages("talk-2")
    # Part of it: the first entries and the window's (a SQL store keeps the window among its entries);
    # a Redis history holds only a run without gaps: the first entries, its window after them.
    part = [entry for entry in page if entry.sequence <= page[2].sequence or entry.message in window]
    try:
        stores[target].restore_history("talk-2", part, window=window)
    except UnrestorableHistoryError:
        stores[target].restore_history("talk-2", page[:3], window=window)
    again = run("import", target, str(path))
    assert again.status == 0, again.err
    assert "1 unchanged" in again.err and "1 history restored" in again.err and "1 created" in again.err
    for memory_id in IDS:
        got = entries(stores[target], memory_id)
        assert len({sequence for sequence, _, _ in got}) == len(got)
        assert same_entries(got, entries(stores[source], memory_id))
    assert same_entries(entries(stores[target], "talk-2"), whole)


def test_export_history_of_a_store_without_history_is_refused(stores, run, tmp_path: Path) -> None:
    plain = stores.url("plain")
    stores[plain].update_messages("talk-1", [UserMessage("q")])
    path = tmp_path / "never.jsonl"
    result = run("export", plain, "--history", "-o", str(path))
    assert result.status == 1
    assert "keeps no history" in result.err and "history=True" in result.err
    assert not path.exists()


def test_import_of_history_into_a_store_without_history_is_refused(stores, run, exported) -> None:
    _, path = exported
    plain = stores.url("plain")
    for arguments in ((), ("--strict",)):
        result = run("import", plain, str(path), *arguments)
        assert result.status == 1
        assert "keeps no history" in result.err and "history=True" in result.err
        assert stores[plain].get_messages(IDS[0]) == []


def test_copy_history_into_a_store_without_history_is_refused(stores, run) -> None:
    source = stores.url("source", history=True)
    fill(stores[source], "talk-1")
    plain = stores.url("plain")
    result = run("copy", source, plain, "--history")
    assert result.status == 1
    assert "destination" in result.err and "history=True" in result.err
    assert stores[plain].get_messages("talk-1") == []
    without = run("copy", plain, source, "--history")
    assert without.status == 1 and "source" in without.err and "keeps no history" in without.err


def test_copy_history_from_langchain4j_layout_is_a_usage_error(stores, run) -> None:
    source = stores.url("source", history=True)
    result = run("copy", "redis://x", source, "--from", "langchain4j-redis", "--history")
    assert result.status == 2
    assert "--history needs a chatmemory source" in result.err


def test_import_of_history_into_a_store_that_cannot_restore_says_so(backend, stores, run, exported) -> None:
    if backend.name != "redis":
        pytest.skip("the LangChain4j layout (on Redis) keeps a history it cannot restore")
    from chatmemory.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore

    store = LangChain4jRedisChatMemoryStore(
        os.environ["CHATMEMORY_TEST_REDIS_URL"], key_prefix=f"t{uuid.uuid4().hex}:", history=True
    )
    try:
        assert not isinstance(store, SupportsHistoryRestore)
        target = stores.add("redis+langchain4j://kept", store)
        _, path = exported
        for arguments in ((), ("--strict",)):
            result = run("import", target, str(path), *arguments)
            assert result.status == 1
            assert "keeps a history but cannot restore one" in result.err
            assert "export without --history" in result.err
            assert store.get_messages(IDS[0]) == []
    finally:
        store.close()


def test_copy_with_history_to_sqlite_and_back(stores, run, tmp_path: Path) -> None:
    from chatmemory.stores.sql import SQLChatMemoryStore

    source = stores.url("source", history=True)
    for memory_id in IDS:
        fill(stores[source], memory_id)
    sqlite = SQLChatMemoryStore(f"sqlite:///{tmp_path / 'copy.db'}", history=True)
    try:
        sqlite.create_schema()
        other = stores.add("sqlite:///other", sqlite)
        copied = run("copy", source, other, "--history")
        assert copied.status == 0, copied.err
        for memory_id in IDS:
            assert sqlite.get_messages(memory_id) == stores[source].get_messages(memory_id)
            assert same_entries(entries(sqlite, memory_id), entries(stores[source], memory_id))
        back = restoring(stores, "back")
        assert run("copy", other, back, "--history").status == 0
        for memory_id in IDS:
            assert stores[back].get_messages(memory_id) == stores[source].get_messages(memory_id)
            assert same_entries(entries(stores[back], memory_id), entries(stores[source], memory_id))
    finally:
        sqlite.close()

"""``chatmemory ls``, ``show`` and ``stats`` on every backend."""

from __future__ import annotations

import contextlib
import datetime

import orjson
import pytest

from chatmemory import AiMessage, SupportsRawRecords, SystemMessage, UserMessage
from chatmemory.cli import main
from chatmemory.memory_times import MemoryTimes
from chatmemory.serialization import dumps_message, langchain4j, loads_message, native, to_openai
from chatmemory.testing.conversation import every_message_kind

WINDOW = [SystemMessage("be brief"), UserMessage("hi [bold]there[/bold]"), AiMessage("hello")]


def test_ls_lists_ids_counts_and_sizes(stores, run) -> None:
    url = stores.url("a")
    store = stores[url]
    store.update_messages("user-1", WINDOW)
    store.update_messages("user-2", every_message_kind())
    store.update_messages("other", WINDOW[:1])
    result = run("ls", url, "--json", "--quiet")
    assert result.status == 0, result.err
    rows = {row["id"]: row for row in orjson.loads(result.out)}
    assert set(rows) == {"user-1", "user-2", "other"}
    assert rows["user-1"]["messages"] == 3
    assert rows["user-2"]["messages"] == len(every_message_kind())
    assert rows["user-1"]["bytes"] == sum(len(dumps_message(m)) for m in WINDOW)
    assert all(row["error"] is None for row in rows.values())
    assert result.err == ""

    prefixed = run("ls", url, "--prefix", "user-", "--json")
    assert {row["id"] for row in orjson.loads(prefixed.out)} == {"user-1", "user-2"}
    assert "2 memories" in prefixed.err

    table = run("ls", url)
    assert table.status == 0
    lines = table.out.splitlines()
    assert lines[0].split() == ["id", "messages", "bytes", "last", "write", "expires", "status"]
    kinds = str(len(every_message_kind()))
    assert [line.split()[:2] for line in lines[1:]] == [["other", "1"], ["user-1", "3"], ["user-2", kinds]]


def test_ls_marks_a_memory_that_does_not_decode_and_exits_1(stores, run) -> None:
    url = stores.url("a")
    stores[url].update_messages("fine", WINDOW)
    stores.backend.write_raw(stores[url], "broken", [dumps_message(WINDOW[0]), b"{not json"])
    result = run("ls", url, "--json")
    assert result.status == 1
    rows = {row["id"]: row for row in orjson.loads(result.out)}
    assert rows["fine"]["error"] is None
    assert "not valid JSON" in rows["broken"]["error"]
    assert "1 do not decode" in result.err


def test_show_table_and_every_json_format(stores, run) -> None:
    url = stores.url("a")
    messages = every_message_kind()
    stores[url].update_messages("m", messages)
    table = run("show", url, "m")
    assert table.status == 0, table.err
    assert f"memory 'm': {len(messages)} messages" in table.out
    assert "tool result" in table.out
    assert orjson.loads(run("show", url, "m", "--format", "native").out) == orjson.loads(native.dumps(messages))
    as_langchain4j = run("show", url, "m", "--format", "langchain4j").out
    assert orjson.loads(as_langchain4j) == orjson.loads(langchain4j.dumps(messages))
    simple = [*WINDOW, AiMessage("bye")]
    stores[url].update_messages("plain", simple)
    assert orjson.loads(run("show", url, "plain", "--format", "openai").out) == to_openai(simple)
    # Ids and text are data, never Rich markup.
    assert "[bold]there[/bold]" in run("show", url, "plain").out


def test_show_of_a_missing_or_broken_memory(stores, run) -> None:
    url = stores.url("a")
    missing = run("show", url, "nobody")
    assert missing.status == 1
    assert "no memory 'nobody'" in missing.err
    stores.backend.write_raw(stores[url], "broken", [dumps_message(WINDOW[0]), b'{"v": 1, "type": "nope"}'])
    broken = run("show", url, "broken")
    assert broken.status == 1
    assert "corrupted" in broken.err
    assert "--format raw" in broken.err
    assert run("show", url, "").status == 2


def test_show_raw_names_what_is_wrong_at_which_position(stores, run) -> None:
    url = stores.url("a")
    store = stores[url]
    good = dumps_message(WINDOW[0])
    stores.backend.write_raw(store, "broken", [good, b"{not json", b"\xff\xfe", good])
    result = run("show", url, "broken", "--format", "raw")
    if not isinstance(store, SupportsRawRecords):
        assert result.status == 2
        assert "read_raw" in result.err
        pytest.skip(f"{type(store).__name__} does not read raw records yet")
    assert result.status == 0, result.err
    records = orjson.loads(result.out)
    assert [r["position"] for r in records] == [0, 1, 2, 3]
    assert records[0]["error"] is None
    assert records[0]["record"] == good.decode()
    assert "not valid JSON" in records[1]["error"]
    assert records[2]["encoding"] == "base64"
    assert "2 of 4 records of 'broken' do not decode: position 1:" in result.err


def test_stats_counts_memories_messages_and_roles(stores, run) -> None:
    url = stores.url("a")
    stores[url].update_messages("a", WINDOW)
    stores[url].update_messages("b", WINDOW[:2])
    result = run("stats", url, "--json")
    assert result.status == 0, result.err
    figures = orjson.loads(result.out)
    assert figures["memories"] == 2
    assert figures["messages"] == 5
    assert figures["messages_per_role"] == {"ai": 1, "system": 2, "user": 2}
    assert "SupportsListing" in figures["capabilities"]
    assert figures["not_decoding"] == []
    text = run("stats", url)
    assert "memories: 2" in text.out
    assert "messages per role: ai 1, system 2, user 2" in text.out


class RecordStore:
    """A minimal store keeping message records as bytes, with read_raw/write_raw: the raw path of ``show``
    and ``ls`` on a store that has the capability, whatever the built-in stores have yet."""

    def __init__(self) -> None:
        self.records: dict[str, list[bytes]] = {}

    def get_messages(self, memory_id: str) -> list:
        return [loads_message(record, memory_id=memory_id) for record in self.records.get(memory_id, [])]

    def update_messages(self, memory_id: str, messages) -> None:
        self.records[memory_id] = [dumps_message(message) for message in messages]

    def delete_messages(self, memory_id: str) -> None:
        self.records.pop(memory_id, None)

    def memory_ids(self):
        return iter(list(self.records))

    def read_raw(self, memory_id: str) -> list[bytes]:
        return list(self.records.get(memory_id, []))

    def write_raw(self, memory_id: str, records) -> None:
        self.records[memory_id] = list(records)


def test_raw_records_on_a_store_that_shows_them(capsys: pytest.CaptureFixture[str]) -> None:
    store = RecordStore()
    assert isinstance(store, SupportsRawRecords)
    good = dumps_message(WINDOW[0])
    store.write_raw("broken", [good, b"{not json", good + b"x"])

    @contextlib.contextmanager
    def opener(url, options):
        yield store

    assert main(["show", "memory://", "broken", "--format", "raw"], open_store=opener) == 0
    captured = capsys.readouterr()
    records = orjson.loads(captured.out)
    assert [record["error"] is None for record in records] == [True, False, False]
    assert "2 of 3 records of 'broken' do not decode: position 1: not valid JSON" in captured.err
    assert "position 2: not valid JSON" in captured.err
    assert main(["ls", "memory://", "--json"], open_store=opener) == 1
    (row,) = orjson.loads(capsys.readouterr().out)
    assert row["messages"] == 3
    assert row["bytes"] == 2 * len(good) + len(b"{not json") + 1
    assert "not valid JSON" in row["error"]


class TimedStore(RecordStore):
    """A store that tells write and expiry times (chatmemory.memory_times.SupportsMemoryTimes)."""

    WRITTEN = datetime.datetime(2026, 11, 30, 9, 0, tzinfo=datetime.timezone.utc)

    def memory_times(self, memory_id: str) -> MemoryTimes | None:
        if memory_id not in self.records:
            return None
        expires = None if memory_id == "forever" else self.WRITTEN + datetime.timedelta(hours=1)
        return MemoryTimes(self.WRITTEN, expires)


def test_ls_shows_times_where_the_store_tells_them(capsys: pytest.CaptureFixture[str]) -> None:
    store = TimedStore()
    store.update_messages("forever", WINDOW)
    store.update_messages("hour", WINDOW)

    @contextlib.contextmanager
    def opener(url, options):
        yield store

    assert main(["ls", "memory://", "--json"], open_store=opener) == 0
    rows = {row["id"]: row for row in orjson.loads(capsys.readouterr().out)}
    assert rows["hour"]["last_write"] == "2026-11-30T09:00:00+00:00"
    assert rows["hour"]["expires_at"] == "2026-11-30T10:00:00+00:00"
    assert rows["forever"]["expires_at"] is None
    assert rows["forever"]["times_known"] is True
    assert main(["ls", "memory://"], open_store=opener) == 0
    captured = capsys.readouterr()
    assert "2026-11-30T09:00:00+00:00  never" in captured.out
    assert "does not report" not in captured.err

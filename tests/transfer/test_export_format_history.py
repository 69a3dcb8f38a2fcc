"""The export line's optional history: entries as written, older lines read as before, bad entries named."""

from __future__ import annotations

import datetime

import orjson
import pytest

from chatmemory import AiMessage, UserMessage
from chatmemory.core.history import HistoryEntry
from chatmemory.serialization import native
from chatmemory.testing.conversation import every_message_kind
from chatmemory.transfer import BadExportLineError, ExportedMemory, decode_line, encode_line

WHEN = datetime.datetime(2026, 11, 30, 10, 0, 0, 123456, tzinfo=datetime.timezone.utc)


def memory_with_history() -> ExportedMemory:
    history = tuple(
        HistoryEntry(sequence, message, WHEN + datetime.timedelta(seconds=sequence))
        for sequence, message in zip((1, 2, 5, 9), [*every_message_kind()[:3], AiMessage("a")], strict=False)
    )
    return ExportedMemory("m", [history[-1].message], None, history)


def test_history_round_trip() -> None:
    memory = memory_with_history()
    line = encode_line(memory)
    assert decode_line(line, 1) == memory
    document = orjson.loads(line)
    assert [entry["sequence"] for entry in document["history"]] == [1, 2, 5, 9]
    assert document["history"][0]["written_at"] == "2026-11-30T10:00:01.123456+00:00"
    assert orjson.dumps(document["history"][3]["message"]) == native.dumps_message(AiMessage("a"))


def test_a_line_without_history_reads_as_before() -> None:
    line = b'{"id":"m","expires_at":null,"memory":' + native.dumps([UserMessage("q")]) + b"}"
    memory = decode_line(line, 1)
    assert memory.history is None
    assert b"history" not in encode_line(memory)
    assert encode_line(ExportedMemory("m", [], None, ())).endswith(b',"history":[]}')


def _line_with(entries: object) -> bytes:
    document = orjson.loads(encode_line(memory_with_history()))
    document["history"] = entries
    return orjson.dumps(document)


def _entry(sequence: object = 1, written_at: object = "2026-11-30T10:00:00+00:00", message: object = None) -> dict:
    return {
        "sequence": sequence,
        "written_at": written_at,
        "message": orjson.loads(native.dumps_message(UserMessage("q"))) if message is None else message,
    }


@pytest.mark.parametrize(
    ("entries", "says"),
    [
        ({"a": 1}, "history of 'm' is not a list"),
        ([_entry(), _entry(1)], "sequence 1 is not an int greater than the one before (1)"),
        ([_entry(2), _entry(1)], "history entry 1 of 'm': sequence 1"),
        ([_entry(0)], "sequence 0"),
        ([_entry(True)], "sequence True"),
        ([_entry(written_at="2026-11-30T10:00:00")], "'written_at' '2026-11-30T10:00:00' has no time zone"),
        ([_entry(written_at=None)], "'written_at' is null"),
        ([{"sequence": 1, "message": {}}], "not an object with the keys"),
        ([_entry(message={"v": 1, "type": "nope"})], "history entry 0 of 'm' does not decode"),
        ([_entry(message={"v": 99, "type": "user", "contents": []})], "version 99"),
    ],
)
def test_a_bad_history_says_which_entry_and_what(entries: object, says: str) -> None:
    with pytest.raises(BadExportLineError) as raised:
        decode_line(_line_with(entries), 7)
    assert str(raised.value).startswith("line 7: ")
    assert says in str(raised.value)

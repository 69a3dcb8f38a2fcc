"""The export line format: the native payload, the id and the expiry, and what a bad line says."""

from __future__ import annotations

import datetime

import orjson
import pytest

from chatmemory.serialization import native
from chatmemory.testing.conversation import ADVERSARIAL_IDS, every_message_kind
from chatmemory.transfer import UNKNOWN_EXPIRY, BadExportLineError, ExportedMemory, decode_line, encode_line

WHEN = datetime.datetime(2026, 11, 30, 10, 0, 0, 123456, tzinfo=datetime.timezone.utc)


@pytest.mark.parametrize("memory_id", ADVERSARIAL_IDS)
@pytest.mark.parametrize("expires_at", [WHEN, None, UNKNOWN_EXPIRY])
def test_round_trip(memory_id: str, expires_at: object) -> None:
    memory = ExportedMemory(memory_id, every_message_kind(), expires_at)  # type: ignore[arg-type]
    line = encode_line(memory)
    assert b"\n" not in line
    assert decode_line(line, 1) == memory


def test_the_line_holds_the_native_payload_as_written() -> None:
    messages = every_message_kind()
    document = orjson.loads(encode_line(ExportedMemory("m", messages, WHEN)))
    assert orjson.dumps(document["memory"]) == native.dumps(messages)
    assert document["expires_at"] == "2026-11-30T10:00:00.123456+00:00"
    assert "expires_at" not in orjson.loads(encode_line(ExportedMemory("m", messages)))


def test_an_expiry_in_another_zone_is_kept_as_the_same_instant() -> None:
    berlin = WHEN.astimezone(datetime.timezone(datetime.timedelta(hours=1)))
    decoded = decode_line(encode_line(ExportedMemory("m", [], berlin)), 1)
    assert decoded.expires_at == WHEN


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (b"{not json", "line 7: not valid JSON"),
        (b"[]", "line 7: not a JSON object"),
        (b'{"id": "m"}', "line 7: expected the keys 'id' and 'memory'"),
        (b'{"id": 5, "memory": {"version": 1, "messages": []}}', "line 7: 'id' is 5, not a string"),
        (b'{"id": "", "memory": {"version": 1, "messages": []}}', "line 7: invalid memory id"),
        (b'{"id": "m", "memory": {"version": 1, "messages": []}, "x": 1}', "line 7: unknown keys ['x']"),
        (b'{"id": "m", "expires_at": 5, "memory": {"version": 1, "messages": []}}', "not an ISO 8601 time or null"),
        (b'{"id": "m", "expires_at": "soon", "memory": {"version": 1, "messages": []}}', "not an ISO 8601 time"),
        (b'{"id": "m", "expires_at": "2026-01-01T00:00:00", "memory": {"version": 1, "messages": []}}', "no time zone"),
        (b'{"id": "m", "memory": {"version": 1, "messages": [{"type": "?"}]}}', "line 7: memory 'm' does not decode"),
        (b'{"id": "m", "memory": {"version": 2, "messages": []}}', "format version 2"),
    ],
)
def test_a_bad_line_says_which_and_what(line: bytes, says: str) -> None:
    with pytest.raises(BadExportLineError) as raised:
        decode_line(line, 7)
    assert says in str(raised.value)
    assert raised.value.line_number == 7


def nested_line(depth: int, memory_id: str = "m") -> bytes:
    """An export line whose JSON nests ``depth`` levels deep in all (the deepest part in a message)."""
    inner = depth - 4  # the line, its memory, the messages, the message
    return (
        b'{"id": "'
        + memory_id.encode()
        + b'", "memory": {"version": 1, "messages": [{"type": "USER", "x": '
        + b"[" * inner
        + b"]" * inner
        + b"}]}}"
    )


@pytest.mark.parametrize("depth", [200, 255, 256, 257, 600, 1023, 1024, 1025, 5000])
def test_a_line_nested_at_any_depth_is_a_bad_line(depth: int) -> None:
    # orjson reads 1024 levels but writes only 255: a line between the two once escaped as a TypeError.
    line = nested_line(depth)
    if depth <= 1024:
        orjson.loads(line)  # JSON the reader takes whole: only handing its payload on could fail
    with pytest.raises(BadExportLineError) as raised:
        decode_line(line, 9)
    assert raised.value.line_number == 9
    assert str(raised.value).startswith("line 9: ")

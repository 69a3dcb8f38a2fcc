"""What a batch read's stored memory settles for an import without another read (pure: no store)."""

from __future__ import annotations

import datetime

import pytest

from chatmemory import SystemMessage, UserMessage
from chatmemory.memory_times import MemoryTimes
from chatmemory.serialization.native import dumps_message
from chatmemory.stored_memories import StoredMemory
from chatmemory.transfer import ExportedMemory, WriteOutcome, judge_stored

NOW = datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc)
WINDOW = [SystemMessage("s"), UserMessage("u")]
RECORDS = [dumps_message(message) for message in WINDOW]
MEMORY = ExportedMemory("m", WINDOW, NOW)


def stored(records: list[bytes] = RECORDS, expires_at: datetime.datetime | None = NOW, **extra: object) -> StoredMemory:
    return StoredMemory("m", records, 7, MemoryTimes(NOW, expires_at), **extra)  # type: ignore[arg-type]


def test_the_same_messages_and_expiry_are_unchanged() -> None:
    assert judge_stored(MEMORY, stored(), True, NOW, times_known=True) is WriteOutcome.UNCHANGED
    within = stored(expires_at=NOW + datetime.timedelta(milliseconds=400))
    assert judge_stored(MEMORY, within, True, NOW, times_known=True) is WriteOutcome.UNCHANGED
    assert judge_stored(MEMORY, stored(expires_at=None), False, None, times_known=True) is WriteOutcome.UNCHANGED


@pytest.mark.parametrize("found", [None, NOW + datetime.timedelta(seconds=5)])
def test_the_same_messages_with_another_expiry_need_it_set(found: datetime.datetime | None) -> None:
    assert judge_stored(MEMORY, stored(expires_at=found), True, NOW, times_known=True) is WriteOutcome.EXPIRY_SET
    assert judge_stored(MEMORY, stored(expires_at=NOW), True, None, times_known=True) is WriteOutcome.EXPIRY_SET


@pytest.mark.parametrize(
    "found",
    [
        None,
        stored(RECORDS[:1]),
        stored([RECORDS[0], dumps_message(UserMessage("other"))]),
        stored([RECORDS[0], b"{not json"]),
        stored(damage="its message list has no metadata next to it"),
    ],
    ids=["absent", "fewer", "other", "does-not-decode", "damaged"],
)
def test_anything_else_is_left_to_the_full_write(found: StoredMemory | None) -> None:
    assert judge_stored(MEMORY, found, True, NOW, times_known=True) is None


def test_an_expiry_the_store_does_not_tell_is_left_to_the_full_write() -> None:
    assert judge_stored(MEMORY, stored(), True, NOW, times_known=False) is None
    assert judge_stored(MEMORY, StoredMemory("m", RECORDS, 7, None), True, NOW, times_known=True) is None

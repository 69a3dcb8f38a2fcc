"""The Redis plans without a server: diffs rebuild the new list, replies map to typed outcomes, and the
operations' steps act on each outcome (cache, retry as a full write, typed errors)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Generator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatmemory import ConcurrentUpdateError, CorruptedMemoryError, StoreError, UserMessage
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.base import SnapshotCache
from chatmemory.stores.redis.commands import ScriptCall
from chatmemory.stores.redis.keys import KeySpace
from chatmemory.stores.redis.operations import Operations
from chatmemory.stores.redis.outcomes import (
    Absent,
    CachedMemory,
    Conflict,
    Corrupted,
    Loaded,
    StaleIncarnation,
    Written,
)
from chatmemory.stores.redis.plan import Planner, WriteKind
from chatmemory.stores.redis.scripts import READ, WRITE

ALPHABET = [UserMessage(f"m{index}") for index in range(6)]


def _planner(ttl: float | None = None) -> Planner:
    return Planner(KeySpace("p:"), ttl, refresh_ttl_on_read=False)


def _cached(planner: Planner, messages: list[ChatMessage], version: int = 7) -> CachedMemory:
    return CachedMemory(version, b"inc", tuple(messages), planner.key_space.keys_of("m"), b"%d" % version)


def _apply(old: list[bytes], call: ScriptCall) -> list[bytes]:
    """What write.lua makes of the list ``old`` (the model of its two modes)."""
    args = call.args
    if args[3] == b"f":
        return list(args[4:])
    span, kept = int(args[5]), int(args[6])
    positions = [int(position) for position in args[7 : 7 + kept]]
    assert all(position < span for position in positions)
    return [old[position] for position in positions] + old[span:] + list(args[7 + kept :])


windows = st.lists(st.sampled_from(ALPHABET), max_size=12)


@given(old=windows, new=windows)
def test_a_save_rebuilds_the_new_list_from_the_cached_one(old: list[ChatMessage], new: list[ChatMessage]) -> None:
    planner = _planner()
    plan = planner.save("m", tuple(new), 7, _cached(planner, old))
    assert plan.call.script is WRITE and plan.call.args[0] == b"7"
    assert _apply([dumps_message(m) for m in old], plan.call) == [dumps_message(m) for m in new]
    if plan.kind is WriteKind.DIFF:
        assert plan.call.args[4] == b"inc"
        # Only the appended messages travel: never more records than a full write would send.
        assert len(plan.call.args) - 7 <= len(new) + len(old)


@given(new=windows)
def test_without_a_cache_or_at_another_version_the_whole_list_goes(new: list[ChatMessage]) -> None:
    planner = _planner()
    for cached, expected in ((None, 7), (_cached(planner, ALPHABET), 5), (_cached(planner, ALPHABET), 0)):
        plan = planner.save("m", tuple(new), expected, cached)
        assert plan.kind is WriteKind.FULL
        assert plan.call.args[0] == b"%d" % expected and plan.call.args[4:] == tuple(dumps_message(m) for m in new)


def test_a_window_turn_is_a_diff_of_one_record() -> None:
    planner = _planner(ttl=1.5)
    window = ALPHABET[:5]
    plan = planner.save("m", (*window[1:], ALPHABET[5]), 7, _cached(planner, window))
    assert plan.kind is WriteKind.DIFF
    assert plan.call.args[2:] == (b"1500", b"d", b"inc", b"1", b"0", dumps_message(ALPHABET[5]))


def test_write_ids_are_unique_hex() -> None:
    first, second = _planner(), _planner()
    ids = [first.write_id() for _ in range(100)] + [second.write_id() for _ in range(100)]
    assert len(set(ids)) == 200
    assert all(int(each, 16) >= 0 for each in ids)


def test_a_message_that_is_not_one_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(TypeError):
        _planner().save("m", ("not a message",), 0, None)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------- replies


def test_read_replies_map_to_outcomes() -> None:
    planner = _planner()
    cached = _cached(planner, ALPHABET[:2])
    with_cache, without = planner.read("m", cached), planner.read("m", None)
    assert with_cache.call.script is READ and with_cache.call.args[1:] == (b"7", b"inc")
    assert planner.read_outcome(with_cache, 1) is cached  # unchanged: the cached state, confirmed
    assert planner.read_outcome(without, [b"m", b"9", b"i", [b"r"]]) == Loaded(9, b"i", [b"r"])
    assert planner.read_outcome(without, [b"a"]) == Absent()
    assert planner.read_outcome(without, [b"c", b"why"]) == Corrupted("why")
    for nonsense in (1, 0, [b"m", b"-3", b"i", []], [b"?"], b"m", None):
        with pytest.raises(StoreError, match="read script replied"):
            planner.read_outcome(without, nonsense)


def test_write_replies_map_to_outcomes() -> None:
    planner = _planner()
    plan = planner.full("m", tuple(ALPHABET[:1]), 0)
    assert planner.write_outcome(plan, [b"w", b"12", b"i"]) == Written(12, b"i")
    assert planner.write_outcome(plan, [b"r", b"11"]) == Written(11, None, replayed=True)
    assert planner.write_outcome(plan, [b"x"]) == Conflict()
    assert planner.write_outcome(plan, [b"s"]) == StaleIncarnation()
    assert planner.write_outcome(plan, [b"c", b"why"]) == Corrupted("why")
    for nonsense in (0, -1, 12, [b"w", b"x", b"i"], [], None):
        with pytest.raises(StoreError, match="write script replied"):
            planner.write_outcome(plan, nonsense)
    diff = planner.diff("m", _cached(planner, ALPHABET[:2]), tuple(ALPHABET[1:3]))
    assert diff is not None and planner.write_outcome(diff, 12) == Written(12, b"inc")
    for nonsense in (0, -1):
        with pytest.raises(StoreError, match="write script replied"):
            planner.write_outcome(diff, nonsense)


# --------------------------------------------------------------------------------------- steps


def _drive(step: Generator[ScriptCall, object, object], *replies: object) -> tuple[object, list[ScriptCall]]:
    calls = [next(step)]
    for reply in replies:
        try:
            calls.append(step.send(reply))
        except StopIteration as done:  # noqa: PERF203 - the step's end is an exception
            return done.value, calls
    raise AssertionError(f"the step wants more replies after {calls}")


def _steps() -> tuple[Operations, SnapshotCache[CachedMemory]]:
    cache: SnapshotCache[CachedMemory] = SnapshotCache(8)
    return Operations(_planner(), cache), cache


def test_a_load_caches_what_it_read_and_an_unchanged_read_returns_it() -> None:
    steps, cache = _steps()
    record = dumps_message(ALPHABET[0])
    assert _drive(steps.load("m"), [b"m", b"9", b"i", [record]])[0] == Snapshot([ALPHABET[0]], 9)
    assert cache.get("m") is not None
    value, calls = _drive(steps.load("m"), 1)
    assert value == Snapshot([ALPHABET[0]], 9) and calls[0].args[1:] == (b"9", b"i")


def test_damage_read_forgets_the_cache_and_raises() -> None:
    steps, cache = _steps()
    _drive(steps.load("m"), [b"m", b"9", b"i", []])
    with pytest.raises(CorruptedMemoryError, match="evicted"):
        _drive(steps.load("m"), [b"c", b"its list was evicted"])
    assert cache.get("m") is None
    with pytest.raises(CorruptedMemoryError):
        _drive(steps.load("m"), [b"m", b"9", b"i", [b"not json"]])
    assert cache.get("m") is None


def test_a_refused_diff_is_sent_again_whole_and_a_conflict_raises() -> None:
    steps, cache = _steps()
    _drive(steps.load("m"), [b"m", b"9", b"i", [dumps_message(m) for m in ALPHABET[:3]]])
    assert _drive(steps.save("m", ALPHABET[1:3], 9), 10)[0] == 10  # a diff replies its version alone
    steps, cache = _steps()
    _drive(steps.load("m"), [b"m", b"9", b"i", [dumps_message(m) for m in ALPHABET[:3]]])
    version, calls = _drive(steps.save("m", ALPHABET[1:4], 9), [b"s"], [b"w", b"10", b"j"])
    assert version == 10
    assert [call.args[3] for call in calls] == [b"d", b"f"] and calls[1].args[0] == b"9"
    cached = cache.get("m")
    assert cached is not None and (cached.version, cached.incarnation) == (10, b"j")
    with pytest.raises(ConcurrentUpdateError):
        _drive(steps.save("m", ALPHABET[:1], 10), [b"x"])
    assert cache.get("m") is None


def test_a_save_older_than_the_cache_is_refused_without_a_call() -> None:
    steps, _ = _steps()
    _drive(steps.load("m"), [b"m", b"9", b"i", []])
    with pytest.raises(ConcurrentUpdateError):
        next(steps.save("m", ALPHABET[:1], 8))


def test_a_replayed_write_reports_its_version_and_caches_nothing() -> None:
    steps, cache = _steps()
    assert _drive(steps.save("m", ALPHABET[:1], 0), [b"r", b"5"])[0] == 5
    assert cache.get("m") is None


def test_an_update_falls_back_to_an_unconditional_full_write() -> None:
    steps, _ = _steps()
    _drive(steps.load("m"), [b"m", b"9", b"i", [dumps_message(m) for m in ALPHABET[:3]]])
    for refusal in ([b"x"], [b"s"], [b"c", b"damaged"]):
        _drive(steps.load("m"), [b"m", b"9", b"i", [dumps_message(m) for m in ALPHABET[:3]]])
        _, calls = _drive(steps.update("m", ALPHABET[1:4]), refusal, [b"w", b"10", b"j"])
        assert [(call.args[0], call.args[3]) for call in calls] == [(b"9", b"d"), (b"", b"f")]


def test_the_plans_import_without_any_driver() -> None:
    code = (
        "import sys\n"
        "for name in ('redis', 'pymongo', 'sqlalchemy', 'psycopg', 'pymysql'):\n    sys.modules[name] = None\n"
        "import chatmemory.stores.redis.plan, chatmemory.stores.redis.operations, chatmemory.stores.redis.keys\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.stdout == "ok\n", result.stderr


def test_ids_are_validated_and_uuids_name_their_canonical_string() -> None:
    steps, _ = _steps()
    session = uuid.UUID("12345678-1234-5678-1234-567812345678")
    call = next(steps.load(session))  # type: ignore[arg-type]
    assert call.memory_id == str(session) and call.keys == steps.planner.key_space.keys_of(str(session))
    with pytest.raises(ValueError):
        next(steps.save("bad\udc00id", [], 0))


def test_a_conflict_keeps_a_newer_state_cached_by_another_writer_of_the_store() -> None:
    steps, cache = _steps()
    records = [dumps_message(m) for m in ALPHABET[:3]]
    _drive(steps.load("m"), [b"m", b"9", b"i", records])
    losing = steps.save("m", ALPHABET[1:4], 9)
    next(losing)
    # Meanwhile a thread or task sharing the store wrote version 10 and cached it.
    assert _drive(steps.save("m", ALPHABET[:4], 9), 10)[0] == 10
    with pytest.raises(ConcurrentUpdateError):
        losing.send([b"x"])
    cached = cache.get("m")
    assert cached is not None and cached.version == 10
    # The losing writer's retry reads "unchanged" instead of the whole list.
    assert _drive(steps.load("m"), 1)[0] == Snapshot(list(ALPHABET[:4]), 10)

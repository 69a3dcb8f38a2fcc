"""The steps of a window memory, driven by hand: what is read, written, retried, without any store."""

from __future__ import annotations

import pytest

from chatmemory import ConcurrentUpdateError, Snapshot, SystemMessage, UserMessage
from chatmemory.core.memory_steps import (
    DeleteMessages,
    GetMessages,
    Load,
    Save,
    Sleep,
    UpdateMessages,
    WindowRules,
    add_steps,
    clear_steps,
    messages_steps,
    set_steps,
)
from chatmemory.stores.base import RetryPolicy


def rules(limit: int = 3) -> WindowRules:
    return WindowRules("m", limit, "max_messages", lambda message: 1, None, False)


def u(text: str) -> UserMessage:
    return UserMessage(text)


def test_add_on_a_versioned_store_loads_then_saves_at_the_version_read() -> None:
    steps = add_steps(rules(), [u("c")], versioned=True, retry=RetryPolicy())
    assert next(steps) == Load("m")
    assert steps.send(Snapshot([u("a"), u("b"), u("x")], 7)) == Save("m", [u("b"), u("x"), u("c")], 7)
    with pytest.raises(StopIteration) as done:
        steps.send(8)
    assert done.value.value.evicted == [u("a")]


def test_a_conflict_sleeps_then_reads_again() -> None:
    steps = add_steps(rules(), [u("c")], versioned=True, retry=RetryPolicy(budget=5))
    next(steps)
    steps.send(Snapshot([], 0))
    sleep = steps.throw(ConcurrentUpdateError("m", 0))
    assert isinstance(sleep, Sleep) and 0 <= sleep.seconds <= RetryPolicy().max_delay
    assert steps.send(None) == Load("m")
    assert steps.send(Snapshot([u("theirs")], 3)) == Save("m", [u("theirs"), u("c")], 3)


def test_max_attempts_ends_the_retries() -> None:
    steps = add_steps(rules(), [u("c")], versioned=True, retry=RetryPolicy(), max_attempts=2)
    next(steps)
    steps.send(Snapshot([], 0))
    steps.throw(ConcurrentUpdateError("m", 0))
    steps.send(None)
    steps.send(Snapshot([], 1))
    with pytest.raises(ConcurrentUpdateError, match="2 attempts"):
        steps.throw(ConcurrentUpdateError("m", 1))


def test_an_unchanged_window_is_not_written() -> None:
    steps = add_steps(rules(), [SystemMessage("s")], versioned=True, retry=RetryPolicy())
    next(steps)
    with pytest.raises(StopIteration) as done:
        steps.send(Snapshot([SystemMessage("s")], 4))
    assert done.value.value.changed is False


def test_add_on_a_plain_store_reads_and_updates() -> None:
    steps = add_steps(rules(), [u("c")], versioned=False, retry=RetryPolicy())
    assert next(steps) == GetMessages("m")
    assert steps.send([u("a")]) == UpdateMessages("m", [u("a"), u("c")])


def test_messages_set_and_clear() -> None:
    steps = messages_steps(rules(2))
    assert next(steps) == GetMessages("m")
    with pytest.raises(StopIteration) as done:
        steps.send([u("a"), u("b"), u("c")])
    assert done.value.value == [u("b"), u("c")]
    assert next(set_steps(rules(2), iter([u("a"), u("b"), u("c")]))) == UpdateMessages("m", [u("b"), u("c")])
    assert next(clear_steps("m")) == DeleteMessages("m")

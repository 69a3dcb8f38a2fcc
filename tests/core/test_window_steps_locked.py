"""The locked path of ``add``, driven by hand: when it is taken, and that it decides the window alike."""

from __future__ import annotations

import pytest

from chatmemory import ConcurrentUpdateError, Snapshot, SystemMessage, UserMessage
from chatmemory.core.memory_steps import Load, Modify, Save, Sleep, Step, Steps, WindowRules, add_steps
from chatmemory.core.window import WindowUpdate
from chatmemory.stores.base import RetryPolicy


def rules(limit: int = 3) -> WindowRules:
    return WindowRules("m", limit, "max_messages", lambda message: 1, None, False)


def u(text: str) -> UserMessage:
    return UserMessage(text)


def conflicted(*, locked: bool, max_attempts: int | None = None) -> tuple[Steps[Step, WindowUpdate], Step]:
    """Steps of ``add(c)`` whose first save has just conflicted; returns them and what they yielded next."""
    steps = add_steps(rules(), [u("c")], versioned=True, retry=RetryPolicy(), max_attempts=max_attempts, locked=locked)
    assert next(steps) == Load("m")
    assert steps.send(Snapshot([u("a")], 1)) == Save("m", [u("a"), u("c")], 1)
    return steps, steps.throw(ConcurrentUpdateError("m", 1))


def test_an_uncontended_add_stays_optimistic_one_load_and_one_save() -> None:
    steps = add_steps(rules(), [u("c")], versioned=True, retry=RetryPolicy(), locked=True)
    assert next(steps) == Load("m")
    assert steps.send(Snapshot([u("a"), u("b"), u("x")], 7)) == Save("m", [u("b"), u("x"), u("c")], 7)
    with pytest.raises(StopIteration) as done:
        steps.send(8)
    assert done.value.value.evicted == [u("a")]


def test_after_a_conflict_the_add_queues_on_the_lock_without_sleeping() -> None:
    steps, step = conflicted(locked=True)
    assert isinstance(step, Modify) and step.memory_id == "m"
    # The change decides the window as the optimistic path does, on what the store read under its lock.
    assert step.change([u("x"), u("y"), u("z")]) == [u("y"), u("z"), u("c")]
    with pytest.raises(StopIteration) as done:
        steps.send(9)
    assert done.value.value.messages == [u("y"), u("z"), u("c")]
    assert done.value.value.evicted == [u("x")]


def test_the_result_is_the_window_of_the_last_call_of_the_change() -> None:
    # A store may start over (two writers creating the memory at once) and call the change again.
    steps, step = conflicted(locked=True)
    assert isinstance(step, Modify)
    step.change([])
    step.change([u("theirs")])
    with pytest.raises(StopIteration) as done:
        steps.send(5)
    assert done.value.value.messages == [u("theirs"), u("c")]


def test_a_change_that_leaves_the_window_as_it_is_asks_for_no_write() -> None:
    steps = add_steps(rules(), [SystemMessage("s")], versioned=True, retry=RetryPolicy(), locked=True)
    next(steps)
    steps.send(Snapshot([], 0))
    step = steps.throw(ConcurrentUpdateError("m", 0))
    assert isinstance(step, Modify)
    assert step.change([SystemMessage("s")]) is None
    with pytest.raises(StopIteration) as done:
        steps.send(4)
    assert done.value.value.changed is False


def test_a_store_without_the_lock_keeps_the_optimistic_retry() -> None:
    steps, step = conflicted(locked=False)
    assert isinstance(step, Sleep)
    assert steps.send(None) == Load("m")


def test_max_attempts_still_bounds_the_attempts_the_locked_one_included() -> None:
    _, step = conflicted(locked=True, max_attempts=2)
    assert isinstance(step, Modify)
    with pytest.raises(ConcurrentUpdateError, match="1 attempt"):
        conflicted(locked=True, max_attempts=1)


def test_the_retry_budget_counts_from_the_first_attempt_not_from_its_conflict() -> None:
    # The tracker is made only when a save conflicts; the time the first attempt took is still spent.
    import time

    steps = add_steps(rules(), [u("c")], versioned=True, retry=RetryPolicy(budget=0.05), locked=False)
    assert next(steps) == Load("m")
    time.sleep(0.06)  # a first round trip slower than the whole budget
    assert steps.send(Snapshot([u("a")], 1)) == Save("m", [u("a"), u("c")], 1)
    with pytest.raises(ConcurrentUpdateError):
        steps.throw(ConcurrentUpdateError("m", 1))

"""Positional edits without a server: the pure list edits, the steps driven by hand, the argument checks."""

from __future__ import annotations

from typing import Any

import pytest

from chatmemory import ConcurrentUpdateError, InMemoryChatMemoryStore, Snapshot, UserMessage, aio
from chatmemory.core import edits
from chatmemory.core.edits import Edited, edit_steps, insert_at, insertion, removal, remove_at
from chatmemory.core.memory_steps import Load, Modify, Save, Sleep
from chatmemory.stores.base import RetryPolicy


def u(text: str) -> UserMessage:
    return UserMessage(text)


ABC = [u("a"), u("b"), u("c")]


@pytest.mark.parametrize("index", [None, -5, -3, -1, 0, 1, 3, 7])
def test_insert_at_places_as_list_insert_does(index: int | None) -> None:
    expected = list(ABC)
    if index is None:
        expected.append(u("x"))
    else:
        expected.insert(index, u("x"))
    assert insert_at(ABC, index, [u("x")]) == expected
    assert insert_at(ABC, index, [u("x"), u("y")]) == [
        *expected[: expected.index(u("x")) + 1],
        u("y"),
        *expected[expected.index(u("x")) + 1 :],
    ]
    assert ABC == [u("a"), u("b"), u("c")]  # the stored list is not touched


@pytest.mark.parametrize(("index", "gone"), [(0, "a"), (1, "b"), (2, "c"), (-1, "c"), (-3, "a")])
def test_remove_at_takes_the_message_at_the_position(index: int, gone: str) -> None:
    removed = remove_at(ABC, index)
    assert removed is not None
    assert removed[1] == u(gone)
    assert removed[0] == [m for m in ABC if m != u(gone)]


@pytest.mark.parametrize("index", [3, 4, -4, -100])
def test_remove_at_with_nothing_at_the_position_is_none(index: int) -> None:
    assert remove_at(ABC, index) is None
    assert remove_at([], 0) is None


def test_an_uncontended_edit_is_one_load_and_one_save() -> None:
    steps = edit_steps("m", removal(0), locked=True, retry=RetryPolicy())
    assert next(steps) == Load("m")
    assert steps.send(Snapshot(list(ABC), 4)) == Save("m", [u("b"), u("c")], 4)
    with pytest.raises(StopIteration) as done:
        steps.send(5)
    assert done.value.value == u("a")


def test_an_edit_that_writes_nothing_saves_nothing() -> None:
    steps = edit_steps("m", removal(5), locked=True, retry=RetryPolicy())
    next(steps)
    with pytest.raises(StopIteration) as done:
        steps.send(Snapshot(list(ABC), 4))
    assert done.value.value is None


def test_after_a_conflict_the_edit_is_decided_again_under_the_lock() -> None:
    steps = edit_steps("m", removal(0), locked=True, retry=RetryPolicy())
    next(steps)
    steps.send(Snapshot(list(ABC), 4))
    step = steps.throw(ConcurrentUpdateError("m", 4))
    assert isinstance(step, Modify)
    # The store may call the change more than once; the last call's decision is the result.
    assert step.change([u("x"), u("y")]) == [u("y")]
    assert step.change([u("z"), u("a")]) == [u("a")]
    with pytest.raises(StopIteration) as done:
        steps.send(9)
    assert done.value.value == u("z")


def test_without_the_lock_a_conflict_is_retried_from_a_fresh_read() -> None:
    steps = edit_steps("m", insertion(1, [u("x")]), locked=False, retry=RetryPolicy())
    next(steps)
    steps.send(Snapshot(list(ABC), 4))
    assert isinstance(steps.throw(ConcurrentUpdateError("m", 4)), Sleep)
    assert steps.send(None) == Load("m")
    assert steps.send(Snapshot([u("q")], 6)) == Save("m", [u("q"), u("x")], 6)


def test_max_attempts_bounds_the_retries() -> None:
    steps = edit_steps("m", insertion(0, [u("x")]), locked=False, retry=RetryPolicy(), max_attempts=1)
    next(steps)
    steps.send(Snapshot([], 0))
    with pytest.raises(ConcurrentUpdateError, match="'m' changed concurrently on each of 1 attempts"):
        steps.throw(ConcurrentUpdateError("m", 0))


def test_a_custom_edit_returns_what_it_decided() -> None:
    store = InMemoryChatMemoryStore()
    store.update_messages("m", list(ABC))

    def swap_ends(stored: list[Any]) -> Edited[int]:
        return Edited([stored[-1], *stored[1:-1], stored[0]], len(stored))

    assert edits.apply_edit(store, "m", swap_ends) == 3
    assert store.get_messages("m") == [u("c"), u("b"), u("a")]


class _Unversioned:
    def get_messages(self, memory_id: str) -> list[Any]:
        return []

    def update_messages(self, memory_id: str, messages: Any) -> None:
        pass

    def delete_messages(self, memory_id: str) -> None:
        pass


@pytest.mark.parametrize(
    ("store", "arguments", "error", "match"),
    [
        ("redis://localhost:6379", {}, TypeError, "not a URL"),
        (_Unversioned(), {}, TypeError, "need a store with versioning.*_Unversioned has none"),
        (
            aio.InMemoryChatMemoryStore(),
            {},
            TypeError,
            "is an asyncio store: edit it with the functions of chatmemory.aio.edits",
        ),
        (InMemoryChatMemoryStore(), {"index": "0"}, TypeError, "position must be an int, not str"),
        (InMemoryChatMemoryStore(), {"index": True}, TypeError, "position must be an int, not bool"),
        (InMemoryChatMemoryStore(), {"retry": 3}, TypeError, "RetryPolicy"),
        (InMemoryChatMemoryStore(), {"max_attempts": 0}, ValueError, "max_attempts must be >= 1"),
    ],
)
def test_bad_arguments_raise_naming_the_fix(store: Any, arguments: dict[str, Any], error: type, match: str) -> None:
    index = arguments.pop("index", 0)
    with pytest.raises(error, match=match):
        edits.remove_message(store, "m", index, **arguments)


def test_an_insertion_refuses_what_is_no_message() -> None:
    with pytest.raises(TypeError, match="expected a chat message"):
        edits.insert_messages(InMemoryChatMemoryStore(), "m", 0, ["plain text"])  # type: ignore[list-item]


async def test_the_asyncio_functions_refuse_a_sync_store() -> None:
    from chatmemory.aio import edits as async_edits

    with pytest.raises(TypeError, match=r"is a sync store: edit it with the functions of chatmemory\.core\.edits"):
        await async_edits.insert_messages(InMemoryChatMemoryStore(), "m", 0, [u("x")])

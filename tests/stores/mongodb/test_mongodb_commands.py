"""The commands an operation yields, and how a reply or a driver error goes back into it (no server)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from chatmemory.core.driving import Sleep
from chatmemory.core.errors import StoreError
from chatmemory.stores.base import Operation
from chatmemory.stores.mongodb.commands import Command, Result, Target, call, result_of

pytest.importorskip("pymongo")

from pymongo.errors import AutoReconnect, OperationFailure

from chatmemory.stores.mongodb import MongoChatMemoryStore


@dataclass
class _Update:
    matched_count: int = 3


@dataclass
class _Delete:
    deleted_count: int = 2


def test_a_result_is_read_as_its_command_says() -> None:
    read, write = Operation.READ, Operation.WRITE
    assert result_of(call(read, "m", Target.WINDOW, "find_one", {"_id": "m"}), {"a": 1}) == {"a": 1}
    assert result_of(call(write, "m", Target.WINDOW, "update_one", {}, {}, result=Result.MATCHED), _Update()) == 3
    assert result_of(call(write, "m", Target.HISTORY, "delete_many", {}, result=Result.DELETED), _Delete()) == 2
    assert result_of(call(write, None, Target.WINDOW, "update_many", {}, {}, result=Result.NOTHING), _Update()) is None


def test_call_keeps_arguments_and_options_apart() -> None:
    command = call(
        Operation.WRITE, "m", Target.WINDOW, "find_one_and_update", {"_id": "m"}, [{"$set": {}}], upsert=True
    )
    assert command == Command(
        Operation.WRITE, "m", Target.WINDOW, "find_one_and_update", ({"_id": "m"}, [{"$set": {}}]), {"upsert": True}
    )


def _store() -> MongoChatMemoryStore:
    # connect=False: no I/O; the operations are driven by hand below.
    from pymongo import MongoClient

    return MongoChatMemoryStore(MongoClient("mongodb://127.0.0.1:1/", connect=False), collection="c")


def _drive(store: MongoChatMemoryStore, replies: list[Any]) -> tuple[list[Any], Any]:
    """Run one update through the store's executor with canned driver replies (an exception is raised)."""
    sent: list[Any] = []

    def send(command: Any) -> Any:
        assert not isinstance(command, Sleep)
        sent.append(command)
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    store._executor.send = send  # type: ignore[method-assign]
    store._perform = lambda command: None if isinstance(command, Sleep) else store._executor.perform(command)
    store._sent = sent  # type: ignore[attr-defined]
    return sent, store.update_messages("m", [])


def test_a_driver_error_goes_back_into_the_operation_where_its_command_was_yielded() -> None:
    store = _store()
    # A lost reply: the same plan is sent again; then a failure the plan cannot read becomes a StoreError.
    with pytest.raises(StoreError, match=r"'m'.*boom"):
        _drive(store, [AutoReconnect("cut"), OperationFailure("boom", code=2)])
    sent = store._sent  # type: ignore[attr-defined]
    assert [command.method for command in sent] == ["find_one_and_update", "find_one_and_update"]
    assert sent[0] == sent[1]

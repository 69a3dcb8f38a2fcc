"""Running an operation of a Redis store: the loop both blocking executors share, and its asyncio twin.

An operation (:mod:`chatmemory.stores.redis.steps`, :mod:`chatmemory.stores.langchain4j_redis.operations`)
yields commands; :func:`drive` hands each to the executor's ``perform`` and sends the reply back in, or
throws ``perform``'s failure back in at the ``yield`` where the command was made, so that the operation
handles it as it would around a direct call. No driver import and no I/O of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["drive", "drive_async"]

_C = TypeVar("_C")
_T = TypeVar("_T")


def drive(step: Generator[_C, Any, _T], perform: Callable[[_C], object]) -> _T:
    """Send each command ``step`` yields with ``perform``; return what ``step`` returns."""
    reply: object = None
    failure: Exception | None = None
    while True:
        try:
            command = step.send(reply) if failure is None else step.throw(failure)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            reply, failure = perform(command), None
        except Exception as exc:  # the operation handles it, as around a direct call
            reply, failure = None, exc


async def drive_async(step: Generator[_C, Any, _T], perform: Callable[[_C], Awaitable[object]]) -> _T:
    """Send each command ``step`` yields with ``await perform(command)``; return what ``step`` returns."""
    reply: object = None
    failure: Exception | None = None
    while True:
        try:
            command = step.send(reply) if failure is None else step.throw(failure)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            reply, failure = await perform(command), None
        except Exception as exc:  # the operation handles it, as around a direct call
            reply, failure = None, exc

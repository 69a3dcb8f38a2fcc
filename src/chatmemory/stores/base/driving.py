"""Running a store operation written as a generator of commands: the loop every executor shares.

A backend writes each operation once, as a generator that yields commands (what to send) and receives
their replies (:mod:`chatmemory.stores.redis.steps`, :mod:`chatmemory.stores.mongodb.operations`,
:mod:`chatmemory.stores.sql.operations`, ...). An executor drives it with :func:`drive` (blocking) or
:func:`drive_async` (asyncio), giving its own ``perform`` that sends one command with its driver. A
failure of ``perform`` is thrown back in at the ``yield`` where the command was made, so the operation
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

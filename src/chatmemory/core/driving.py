"""The one seam every operation is written against: a generator of commands, and the loops that drive it.

A memory operation (:mod:`chatmemory.core.memory_steps`) and a store operation (each backend's
``operations`` module) are generators: they yield commands (what to do), receive each reply, and return
their result. :func:`drive` (blocking) and :func:`drive_async` (asyncio) run one with a ``perform`` that
sends a command; :func:`drive_iter` and :func:`drive_async_iter` run a listing, handing out the values of
each :class:`Emit`. A failure of ``perform`` is thrown back in at the ``yield`` where the command was made.
:class:`Sleep` is the one wait command every executor runs (``time.sleep`` or ``asyncio.sleep``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

__all__ = ["Emit", "ListingClosed", "Sleep", "Steps", "drive", "drive_async", "drive_async_iter", "drive_iter"]

_C = TypeVar("_C")
_T = TypeVar("_T")
_V = TypeVar("_V")

Steps: TypeAlias = Generator[_C, Any, _T]
"""An operation: yields commands of type ``_C``, receives each one's reply, returns ``_T``."""


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait ``seconds`` before the next command (a retry's backoff; reply: ``None``)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Emit(Generic[_V]):
    """Hand ``values`` to the caller of a listing (the iterator forms yield them, then resume the operation)."""

    values: tuple[_V, ...]


class ListingClosed(Exception):
    """Thrown into a listing whose caller stopped reading, so that it ends what it holds before it goes."""


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


def drive_iter(step: Generator[Any, Any, None], perform: Callable[[Any], object]) -> Iterator[Any]:
    """Drive a listing with ``perform``, yielding the values of each :class:`Emit` it yields.

    A caller that stops early (closes the iterator) throws :class:`ListingClosed` in, so the listing
    ends what it holds; a failure of ``perform`` goes back in where the command was yielded.
    """
    try:
        command = step.send(None)
        while True:
            if isinstance(command, Emit):
                try:
                    yield from command.values
                except GeneratorExit:
                    command = step.throw(ListingClosed())
                else:
                    command = step.send(None)
                continue
            try:
                reply = perform(command)
            except Exception as exc:
                command = step.throw(exc)
            else:
                command = step.send(reply)
    except (StopIteration, ListingClosed):
        return


async def drive_async_iter(
    step: Generator[Any, Any, None], perform: Callable[[Any], Awaitable[object]]
) -> AsyncGenerator[Any, None]:
    """The asyncio form of :func:`drive_iter`: each command sent with ``await perform(command)``."""
    try:
        command = step.send(None)
        while True:
            if isinstance(command, Emit):
                try:
                    for value in command.values:
                        yield value
                except GeneratorExit:
                    command = step.throw(ListingClosed())
                else:
                    command = step.send(None)
                continue
            try:
                reply = await perform(command)
            except Exception as exc:
                command = step.throw(exc)
            else:
                command = step.send(reply)
    except (StopIteration, ListingClosed):
        return

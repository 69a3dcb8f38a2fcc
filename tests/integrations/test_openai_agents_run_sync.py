"""``Runner.run_sync`` several times with one ChatMemorySession, and one session from several threads' loops.

``run_sync`` drives each run on its thread's default event loop, and makes a new one when there is none or
it is closed: a script, a Celery task, a notebook cell or a test calling it again meets a loop other than
the one the store was made on, and maybe another loop at each call. Each test makes the store on a loop of
its own (``asyncio.run``, as an application making it at start-up), then uses it from other loops, on every
async backend. The work runs in a thread that must finish in time: a store that hangs fails the test.
The model is the SDK's own, with the network replaced (see openai_agents_transport).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from agents import Runner, SQLiteSession

from chatmemory import aio
from chatmemory.integrations.openai_agents import ChatMemorySession
from integrations.openai_agents_transport import ScriptedResponses, weather_conversation
from support.backends import AsyncBackend

T = TypeVar("T")

_TIMEOUT = 60.0


def _in_thread(work: Callable[[], T], what: str) -> T:
    """``work()`` run in a thread of its own; fail when it has not finished in time, re-raise what it raised."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = work()
        except BaseException as exc:  # handed to the test's thread as it is
            outcome["error"] = exc

    thread = threading.Thread(target=target, name=what, daemon=True)
    thread.start()
    thread.join(_TIMEOUT)
    if thread.is_alive():
        pytest.fail(f"{what} did not finish in {_TIMEOUT:.0f} s: it hangs")
    if "error" in outcome:
        raise outcome["error"]
    result: T = outcome["result"]
    return result


@contextlib.contextmanager
def _store_on_its_own_loop(async_backend: AsyncBackend) -> Iterator[aio.ChatMemoryStore]:
    """A store made on a loop closed before it is used (as at start-up), closed on another after the test.

    A store that hung is left as it is: closing it might hang too. A store given an engine serves the loop
    the engine first ran on only (tests/aio/test_any_loop.py checks the StoreError that says so): the
    backend that hands one in is skipped.
    """
    if async_backend.name == "sqlite_aiosqlite":
        pytest.skip("an AsyncEngine passed in serves one event loop; run_sync makes a loop per run")
    store = asyncio.run(async_backend.make_store())
    try:
        yield store
    except pytest.fail.Exception:
        raise
    except BaseException:
        asyncio.run(async_backend.close_store(store))
        raise
    asyncio.run(async_backend.close_store(store))


class _Loops:
    """The default event loops of the calling thread, each set before a ``run_sync`` and closed after."""

    def __init__(self) -> None:
        self._current: asyncio.AbstractEventLoop | None = None

    def fresh(self) -> None:
        """Close the thread's default loop (if this made one) and set a new one."""
        self.close()
        self._current = asyncio.new_event_loop()
        asyncio.set_event_loop(self._current)

    def close(self) -> None:
        if self._current is not None:
            self._current.close()
            asyncio.set_event_loop(None)
            self._current = None


def _converse(session: Any, loop_per_call: bool) -> tuple[list[Any], list[Any], list[Any]]:
    """The weather conversation through ``Runner.run_sync``: final outputs, requests sent, items stored."""
    inputs, outputs = weather_conversation()
    script = ScriptedResponses(outputs)
    agent = script.agent()
    loops = _Loops()
    try:
        loops.fresh()
        finals = []
        for text in inputs:
            if loop_per_call:
                loops.fresh()
            finals.append(Runner.run_sync(agent, text, session=session).final_output)
    finally:
        loops.close()
    # Read back on yet another loop.
    items = asyncio.run(session.get_items())
    return finals, [request["input"] for request in script.requests], items


def _on_sqlite_session(loop_per_call: bool) -> tuple[list[Any], list[Any], list[Any]]:
    """The same conversation on the SDK's SQLiteSession (bound to no loop): the reference."""
    session = SQLiteSession("reference")
    try:
        return _converse(session, loop_per_call)
    finally:
        session.close()


# run_sync shuts the async generators of the loop it keeps down after each run, and the next run on that loop
# starts httpx's auth flow (an async generator) on it: a ResourceWarning of the SDK's, with any session.
@pytest.mark.filterwarnings(
    "ignore:asynchronous generator .* was scheduled after loop.shutdown_asyncgens:ResourceWarning"
)
@pytest.mark.parametrize("loop_per_call", [False, True], ids=["one loop for the runs", "a new loop per run"])
def test_run_sync_again_and_again_on_one_session(async_backend: AsyncBackend, loop_per_call: bool) -> None:
    with _store_on_its_own_loop(async_backend) as store:
        session = ChatMemorySession("run-sync", store=store)
        finals, requests, items = _in_thread(lambda: _converse(session, loop_per_call), "Runner.run_sync")
    expected_finals, expected_requests, expected_items = _in_thread(
        lambda: _on_sqlite_session(loop_per_call), "SQLiteSession"
    )
    assert finals == expected_finals == ["Munich and Rome: sunny.", "Paris: sunny.", "The weather in Munich and Rome."]
    # Each run was sent what the earlier runs stored, exactly as with the SDK's own session.
    assert requests == expected_requests
    assert items == expected_items


def test_threads_each_with_its_own_loop_write_one_session(async_backend: AsyncBackend) -> None:
    threads, adds = 5, 10

    async def add(session: ChatMemorySession, number: int) -> None:
        for index in range(adds):
            await session.add_items([{"role": "user", "content": f"{number}:{index}"}])

    def all_threads(session: ChatMemorySession) -> list[Any]:
        errors: list[BaseException] = []

        def writer(number: int) -> None:
            try:
                asyncio.run(add(session, number))
            except BaseException as exc:  # counted below
                errors.append(exc)

        workers = [threading.Thread(target=writer, args=(number,), daemon=True) for number in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(_TIMEOUT)
        if any(worker.is_alive() for worker in workers):
            pytest.fail(f"a writer thread did not finish in {_TIMEOUT:.0f} s: it hangs")
        if errors:
            raise errors[0]
        return asyncio.run(session.get_items())

    with _store_on_its_own_loop(async_backend) as store:
        session = ChatMemorySession("threads", store=store)
        items = _in_thread(lambda: all_threads(session), "writer threads")
    contents = [item["content"] for item in items]
    assert sorted(contents) == sorted(f"{number}:{index}" for number in range(threads) for index in range(adds))
    for number in range(threads):
        mine = [content for content in contents if content.startswith(f"{number}:")]
        assert mine == [f"{number}:{index}" for index in range(adds)], "a thread's items are out of order"

"""Sending one command with a redis-py client, blocking or asyncio: for both Redis layouts.

A command (:mod:`chatmemory.stores.redis.commands`, :mod:`chatmemory.stores.langchain4j_redis.commands`)
names the client method and its arguments (``request()``). A script is sent as ``EVALSHA``; a server
that does not know it (restarted, flushed, a new cluster node) answers ``NOSCRIPT``, and the script is
sent again as ``EVAL`` (``fallback()``), which runs it and caches it there. A ``SCAN`` is the
executor's own: it streams. A batch of commands (:class:`~chatmemory.stores.redis.batch_reads.Pipelined`)
goes in one pipeline (:func:`send_pipelined`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from chatmemory.stores.redis.commands import ScriptCall
from chatmemory.stores.redis.driver import NoScriptError

__all__ = ["Request", "send", "send_async", "send_pipelined"]


class Request(Protocol):
    """A command that is one client call."""

    def request(self) -> tuple[str, tuple[Any, ...]]:
        """The client method and its arguments."""
        ...


def send(client: Any, command: Request) -> Any:
    """Call the client method ``command`` names and return its reply (``EVAL`` after a ``NOSCRIPT``)."""
    if type(command) is ScriptCall:  # the store's every read and write: its request() without the detour
        names = command.names
        try:
            return client.execute_command("EVALSHA", command.script.sha, len(names), *names, *command.args)
        except NoScriptError:
            return client.eval(*command.fallback())
    method, args = command.request()
    try:
        return getattr(client, method)(*args)
    except NoScriptError:
        return client.eval(*command.fallback())  # type: ignore[attr-defined]  # only scripts get NOSCRIPT


async def send_async(client: Any, command: Request) -> Any:
    """Await the client method ``command`` names and return its reply (``EVAL`` after a ``NOSCRIPT``)."""
    if type(command) is ScriptCall:  # as in send()
        names = command.names
        try:
            return await client.execute_command("EVALSHA", command.script.sha, len(names), *names, *command.args)
        except NoScriptError:
            return await client.eval(*command.fallback())
    method, args = command.request()
    try:
        return await getattr(client, method)(*args)
    except NoScriptError:
        return await client.eval(*command.fallback())  # type: ignore[attr-defined]  # only scripts get NOSCRIPT


def send_pipelined(client: Any, commands: Sequence[Request]) -> list[Any]:
    """Send ``commands`` in one pipeline (no transaction); their replies in order.

    A script the server did not know is sent again on its own as ``EVAL``. Any other error the server
    answered a command with is its reply (an exception instance): the caller raises it for that command.
    """
    pipeline = client.pipeline(transaction=False)
    for command in commands:
        method, args = command.request()
        getattr(pipeline, method)(*args)
    replies: list[Any] = pipeline.execute(raise_on_error=False)
    for index, reply in enumerate(replies):
        if isinstance(reply, NoScriptError):
            replies[index] = send(client, commands[index])
    return replies

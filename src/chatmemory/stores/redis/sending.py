"""Sending one command with a redis-py client, blocking or asyncio: for both Redis layouts.

A command (:mod:`chatmemory.stores.redis.commands`, :mod:`chatmemory.stores.langchain4j_redis.commands`)
names the client method and its arguments (``request()``). A script is sent as ``EVALSHA``; a server
that does not know it (restarted, flushed, a new cluster node) answers ``NOSCRIPT``, and the script is
sent again as ``EVAL`` (``fallback()``), which runs it and caches it there. A ``SCAN`` is the
executor's own: it streams.
"""

from __future__ import annotations

from typing import Any, Protocol

from chatmemory.stores.redis.commands import ScriptCall
from chatmemory.stores.redis.driver import NoScriptError

__all__ = ["Request", "send", "send_async"]


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

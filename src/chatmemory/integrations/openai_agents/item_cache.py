"""The items of stored messages, converted once per message and handed out as fresh dicts.

``get_items`` reads the whole session; converting every message to items again on each read is most of
its cost and grows with the session. Messages never change, and a store answers a read whose version did
not move with the message objects it read or wrote before (its snapshot cache), so :class:`ItemCache`
keeps each message's items as JSON, by the message's identity: a read converts only the messages it has
not seen and decodes the items of all of them in one ``orjson.loads``, which gives the caller dicts of its
own to change. It holds the messages of the latest reads only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import orjson

from chatmemory.core.errors import SerializationError
from chatmemory.core.messages import ChatMessage
from chatmemory.integrations.openai_agents.items import last_items, message_items

__all__ = ["ItemCache"]

# Entries of messages no longer read are dropped once they outnumber the read's messages by this many.
_SLACK = 64
# After a read that found none of the kept messages (a store that decodes the list on every read: no
# snapshot cache, or other writers each time), reads keep nothing new but every this many-th.
_RETRY = 16


class _Entry(NamedTuple):
    message: ChatMessage
    item_count: int
    """How many items the message gives."""
    json: bytes | None
    """The items as the inside of a JSON array (``b""`` for none); ``None``: items JSON does not give back."""


def _entry(message: ChatMessage, items: list[dict[str, Any]]) -> _Entry:
    """What is kept of ``message``: its items as JSON (message values are JSON values, so JSON gives them back).

    A value JSON cannot write (none a message holds) leaves the message to be converted on each read.
    """
    try:
        kept: bytes | None = orjson.dumps(items)[1:-1]
    except TypeError:  # orjson.JSONEncodeError
        kept = None
    return _Entry(message, len(items), kept)


class ItemCache:
    """Items of the messages a session read, by message identity (see the module docs)."""

    __slots__ = ("_cold", "_entries", "_system_role")

    def __init__(self, system_role: str) -> None:
        self._system_role = system_role
        self._entries: dict[int, _Entry] = {}
        self._cold = 0  # reads in a row that found none of the kept messages

    def last_items(self, messages: Sequence[ChatMessage], limit: int | None) -> list[dict[str, Any]]:
        """What :func:`.items.last_items` gives (the same errors too), from kept items where it can."""
        if limit is not None and limit <= 0:
            return []
        entries = self._entries
        had_entries = bool(entries)
        keep = self._cold % _RETRY == 0
        # Newest first: a kept entry, or a message converted now with its items (fresh, handed out as they are).
        newest_first: list[_Entry | tuple[_Entry, list[dict[str, Any]]]] = []
        count = hits = 0
        try:
            for message in reversed(messages):
                entry = entries.get(id(message))
                if entry is None or entry.message is not message:
                    items = message_items(message, self._system_role)
                    entry = _entry(message, items) if keep else _Entry(message, len(items), None)
                    if keep:
                        entries[id(message)] = entry
                    newest_first.append((entry, items))
                else:
                    hits += 1
                    newest_first.append(entry)
                count += entry.item_count
                if limit is not None and count >= limit:
                    break
        except SerializationError:
            # Raised again with the message's position in the session, as the conversion of the list names it.
            return last_items(messages, limit, self._system_role)
        self._cold = self._cold + 1 if not hits and had_entries and newest_first else 0
        if len(entries) > len(messages) + _SLACK:
            self._entries = {
                id(kept.message): kept
                for kept in (part if isinstance(part, _Entry) else part[0] for part in newest_first)
            }
        result: list[dict[str, Any]] = []
        run: list[bytes] = []  # the JSON of consecutive kept entries, decoded in one call
        for part in reversed(newest_first):
            if isinstance(part, _Entry) and part.json is not None:
                if part.json:
                    run.append(part.json)
                continue
            if run:
                result.extend(orjson.loads(b"[" + b",".join(run) + b"]"))
                run = []
            result.extend(message_items(part.message, self._system_role) if isinstance(part, _Entry) else part[1])
        if run:
            result.extend(orjson.loads(b"[" + b",".join(run) + b"]"))
        return result if limit is None else result[-limit:]

    def clear(self) -> None:
        """Drop every kept item."""
        self._entries = {}
        self._cold = 0

"""The export file: one memory per line, in chatmemory's native versioned format, with its expiry.

A line is a JSON object::

    {"id": "user-42", "expires_at": "2026-11-30T10:00:00.000000+00:00", "memory": {"version": 1, "messages": [...]}}

``memory`` is exactly what :func:`chatmemory.serialization.native.dumps` writes; ``expires_at`` is ISO 8601,
``null`` for a memory that never expires, absent when its store could not tell; ``history`` (only in exports
made with ``--history``) is the memory's history, oldest first. The fields: docs/cli.md#chatmemory-export.

Pure functions over bytes: the command reads and writes the file, this module only turns lines into
:class:`ExportedMemory` values and back.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

import orjson

from chatmemory.core.errors import ChatMemoryError, CorruptedMemoryError
from chatmemory.core.history import HistoryEntry
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import validate_memory_id
from chatmemory.serialization import native
from chatmemory.serialization.native import dumps_message, loads_message

__all__ = ["UNKNOWN_EXPIRY", "BadExportLineError", "ExportedMemory", "decode_line", "encode_line"]


class _UnknownExpiry:
    """The type of :data:`UNKNOWN_EXPIRY`."""

    def __repr__(self) -> str:
        return "UNKNOWN_EXPIRY"


UNKNOWN_EXPIRY = _UnknownExpiry()
"""``ExportedMemory.expires_at`` when the source store could not tell when the memory expires."""


@dataclass(frozen=True, slots=True)
class ExportedMemory:
    """One memory on its way between stores.

    Attributes:
        memory_id: the memory's id.
        messages: its messages, oldest first.
        expires_at: when it expires (aware datetime), ``None`` for never, or :data:`UNKNOWN_EXPIRY`.
        history: its history entries, oldest first, when they travel with it (``None``: they do not).
    """

    memory_id: str
    messages: list[ChatMessage]
    expires_at: datetime.datetime | _UnknownExpiry | None = UNKNOWN_EXPIRY
    history: tuple[HistoryEntry, ...] | None = None


class BadExportLineError(ChatMemoryError):
    """A line of an export file is not a memory; the message names the line number and what is wrong."""

    def __init__(self, line_number: int, reason: str) -> None:
        self.line_number = line_number
        self.reason = reason
        super().__init__(f"line {line_number}: {reason}")


def encode_line(memory: ExportedMemory) -> bytes:
    """The export line of ``memory`` (without the newline)."""
    document: dict[str, Any] = {"id": memory.memory_id}
    if isinstance(memory.expires_at, datetime.datetime):
        document["expires_at"] = _iso(memory.expires_at)
    elif memory.expires_at is None:
        document["expires_at"] = None
    # The payload is embedded as the bytes native.dumps made, so the file holds exactly the native format.
    document["memory"] = orjson.Fragment(native.dumps(memory.messages))
    if memory.history is not None:
        document["history"] = [
            {
                "sequence": entry.sequence,
                "written_at": _iso(entry.written_at),
                "message": orjson.Fragment(dumps_message(entry.message)),
            }
            for entry in memory.history
        ]
    return orjson.dumps(document)


def _iso(value: datetime.datetime) -> str:
    return value.astimezone(datetime.timezone.utc).isoformat(timespec="microseconds")


def _expiry(value: Any, line_number: int, field: str = "'expires_at'") -> datetime.datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadExportLineError(line_number, f"{field} is {value!r}, not an ISO 8601 time or null")
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise BadExportLineError(line_number, f"{field} is {value!r}, not an ISO 8601 time") from None
    if parsed.tzinfo is None:
        raise BadExportLineError(line_number, f"{field} {value!r} has no time zone")
    return parsed


def decode_line(line: bytes | str, line_number: int) -> ExportedMemory:
    """The memory on one export line.

    Raises:
        BadExportLineError: the line is not valid JSON (or nests too deeply), lacks ``id`` or ``memory``,
            has an invalid id, or its payload does not decode (a corrupted or newer-format payload); the
            message says which.
    """
    try:
        document = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise BadExportLineError(line_number, f"not valid JSON ({exc})") from None
    if not isinstance(document, dict):
        raise BadExportLineError(line_number, "not a JSON object")
    unknown = set(document) - {"id", "expires_at", "memory", "history"}
    if unknown:
        raise BadExportLineError(line_number, f"unknown keys {sorted(unknown)}")
    if "id" not in document or "memory" not in document:
        raise BadExportLineError(line_number, "expected the keys 'id' and 'memory'")
    raw_id = document["id"]
    if not isinstance(raw_id, str):
        raise BadExportLineError(line_number, f"'id' is {raw_id!r}, not a string")
    try:
        memory_id = validate_memory_id(raw_id)
    except (ValueError, TypeError) as exc:
        raise BadExportLineError(line_number, f"invalid memory id: {exc}") from None
    expires_at = _expiry(document["expires_at"], line_number) if "expires_at" in document else UNKNOWN_EXPIRY
    try:
        # orjson reads JSON nested up to 1024 levels but writes at most 255: a line in between is read
        # whole and only its payload cannot be handed on.
        payload = orjson.dumps(document["memory"])
    except orjson.JSONEncodeError as exc:
        raise BadExportLineError(
            line_number, f"memory {memory_id!r} is nested too deeply to be a chatmemory payload ({exc})"
        ) from None
    try:
        messages = native.loads(payload, memory_id=memory_id)
    except CorruptedMemoryError as exc:
        raise BadExportLineError(line_number, f"memory {memory_id!r} does not decode: {exc.reason}") from None
    except ChatMemoryError as exc:  # UnsupportedFormatVersionError: names the id and what to upgrade
        raise BadExportLineError(line_number, str(exc)) from None
    history = _history(document["history"], memory_id, line_number) if "history" in document else None
    return ExportedMemory(memory_id, messages, expires_at, history)


_ENTRY_KEYS = frozenset({"sequence", "written_at", "message"})


def _history(value: Any, memory_id: str, line_number: int) -> tuple[HistoryEntry, ...]:
    """The history entries of a line's ``history`` (see the module docstring)."""
    if not isinstance(value, list):
        raise BadExportLineError(line_number, f"the history of {memory_id!r} is not a list")
    entries = []
    previous = 0
    for position, item in enumerate(value):
        where = f"history entry {position} of {memory_id!r}"
        if not isinstance(item, dict) or set(item) != _ENTRY_KEYS:
            raise BadExportLineError(line_number, f"{where} is not an object with the keys {sorted(_ENTRY_KEYS)}")
        sequence = item["sequence"]
        if isinstance(sequence, bool) or not isinstance(sequence, int) or sequence <= previous:
            raise BadExportLineError(
                line_number, f"{where}: sequence {sequence!r} is not an int greater than the one before ({previous})"
            )
        written_at = _expiry(item["written_at"], line_number, f"{where}: 'written_at'")
        if written_at is None:
            raise BadExportLineError(line_number, f"{where}: 'written_at' is null, not an ISO 8601 time")
        try:
            message = loads_message(orjson.dumps(item["message"]), memory_id=memory_id)
        except orjson.JSONEncodeError as exc:
            raise BadExportLineError(line_number, f"{where} is nested too deeply ({exc})") from None
        except CorruptedMemoryError as exc:
            raise BadExportLineError(line_number, f"{where} does not decode: {exc.reason}") from None
        except ChatMemoryError as exc:  # UnsupportedFormatVersionError: names what to upgrade
            raise BadExportLineError(line_number, f"{where}: {exc}") from None
        entries.append(HistoryEntry(sequence, message, written_at))
        previous = sequence
    return tuple(entries)

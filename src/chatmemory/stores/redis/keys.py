"""Where a memory lives in Redis: its keys in one hash slot, and the patterns that list them.

A memory's keys are ``<prefix>{<escaped id>}:meta``, ``<prefix>{<escaped id>}:messages``, for a store
built with history ``<prefix>{<escaped id>}:history``, and while a writer holds the memory's lease lock
``<prefix>{<escaped id>}:lock``. The braces make the escaped id the hash tag, so
all of them sit in one slot of a Redis Cluster and one script can touch them together. ``{``, ``}`` and
``%`` are percent-escaped in the id so that no id can end the tag early and every key maps back to exactly
one id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from chatmemory.core.store import validate_memory_id

__all__ = ["KeySpace", "MemoryKeys"]

_ESCAPED_ID = re.compile(rb"(?:[^%{}]|%25|%7B|%7D)+")
_GLOB_SPECIAL = re.compile(rb"([*?\[\]\\])")
_UNESCAPES = {b"%25": b"%", b"%7B": b"{", b"%7D": b"}"}
_META, _MESSAGES, _HISTORY, _LOCK = b":meta", b":messages", b":history", b":lock"


def _escape_id(memory_id: str) -> bytes:
    raw = memory_id.encode("utf-8", "surrogatepass")
    return raw.replace(b"%", b"%25").replace(b"{", b"%7B").replace(b"}", b"%7D")


def _unescape_id(escaped: bytes) -> str | None:
    if _ESCAPED_ID.fullmatch(escaped) is None:
        return None
    raw = re.sub(rb"%(?:25|7B|7D)", lambda match: _UNESCAPES[match.group(0)], escaped)
    try:
        return validate_memory_id(raw.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError):
        return None


def glob_literal(text: bytes) -> bytes:
    """``text`` as a SCAN MATCH pattern that matches only itself."""
    return _GLOB_SPECIAL.sub(rb"\\\1", text)


@dataclass(frozen=True, slots=True)
class MemoryKeys:
    """The keys of one memory.

    Attributes:
        meta: the metadata hash (version, incarnation, length, recent write ids).
        messages: the list of message records.
        history: the list of history entries (written only by stores built with history).
        lock: the lease lock of ``modify`` (a string: its holder's token), absent while nobody holds it.
        window: ``(meta, messages)``: the keys a script of a store without history is sent.
        with_history: ``(meta, messages, history)``: the keys a script of a store with history is sent.
    """

    meta: bytes
    messages: bytes
    history: bytes
    lock: bytes
    window: tuple[bytes, bytes]
    with_history: tuple[bytes, bytes, bytes]


class KeySpace:
    """The keys of every memory under one key prefix.

    Args:
        key_prefix: put before every key (already validated).
    """

    def __init__(self, key_prefix: str) -> None:
        self._prefix = key_prefix.encode("utf-8")

    def keys_of(self, memory_id: str) -> MemoryKeys:
        """The keys of ``memory_id`` (validated here)."""
        tagged = self._prefix + b"{" + _escape_id(validate_memory_id(memory_id)) + b"}"
        meta, messages, history = tagged + _META, tagged + _MESSAGES, tagged + _HISTORY
        return MemoryKeys(meta, messages, history, tagged + _LOCK, (meta, messages), (meta, messages, history))

    @property
    def meta_pattern(self) -> bytes:
        """A SCAN MATCH pattern for the metadata key of every memory under the prefix."""
        return glob_literal(self._prefix) + b"{*}" + _META

    @property
    def history_pattern(self) -> bytes:
        """A SCAN MATCH pattern for the history key of every memory under the prefix."""
        return glob_literal(self._prefix) + b"{*}" + _HISTORY

    def id_of_meta_key(self, key: bytes) -> str | None:
        """The memory id whose metadata key is ``key``, or ``None`` for a key this store did not write."""
        return self._id_of(key, _META)

    def new_id_of_meta_key(self, key: bytes, seen: set[str]) -> str | None:
        """The memory id of the metadata key ``key`` unless it is in ``seen`` (then it is added there).

        SCAN may give a key twice; a key that does not parse belongs to someone else (``None`` too).
        """
        memory_id = self._id_of(key, _META)
        if memory_id is None or memory_id in seen:
            return None
        seen.add(memory_id)
        return memory_id

    def id_of_history_key(self, key: bytes) -> str | None:
        """The memory id whose history key is ``key``, or ``None`` for a key this store did not write."""
        return self._id_of(key, _HISTORY)

    def _id_of(self, key: bytes, suffix: bytes) -> str | None:
        if not (key.startswith(self._prefix + b"{") and key.endswith(b"}" + suffix)):
            return None
        return _unescape_id(key[len(self._prefix) + 1 : -len(b"}" + suffix)])

    @staticmethod
    def pattern_of_prefix(key_prefix: str) -> bytes:
        """A SCAN MATCH pattern for every key a store with ``key_prefix`` writes (the prefix taken literally)."""
        return glob_literal(key_prefix.encode("utf-8")) + b"*"

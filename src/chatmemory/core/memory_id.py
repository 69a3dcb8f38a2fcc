"""Memory id validation: one rule for every memory and every store."""

from __future__ import annotations

import uuid

__all__ = ["MAX_MEMORY_ID_LENGTH", "MemoryId", "validate_memory_id"]

MemoryId = str | int | uuid.UUID
"""What a memory id may be given as: a ``str``, or an ``int`` or ``uuid.UUID`` used as its ``str()``."""
MAX_MEMORY_ID_LENGTH = 255


def validate_memory_id(memory_id: object) -> str:
    """Return the memory id as a ``str``.

    A non-empty ``str`` of at most 255 characters is used as it is; an ``int`` is converted with ``str()``,
    a ``uuid.UUID`` (common as a session id) to its canonical form (``str(uuid)``: 36 lower-case
    characters with hyphens), so ``UUID(x)`` and ``str(UUID(x))`` name the same memory.

    Raises:
        TypeError: for anything else (None, bytes, bool, float, containers).
        ValueError: for an empty or over-long string, or one holding a lone surrogate.
    """
    if isinstance(memory_id, uuid.UUID):
        return str(memory_id)
    if isinstance(memory_id, bool) or not isinstance(memory_id, (str, int)):
        raise TypeError(f"a memory id must be a str, an int or a uuid.UUID, not {type(memory_id).__name__}")
    text = memory_id if isinstance(memory_id, str) else str(memory_id)
    if not text:
        raise ValueError("a memory id must not be empty")
    if len(text) > MAX_MEMORY_ID_LENGTH:
        raise ValueError(f"a memory id must be at most {MAX_MEMORY_ID_LENGTH} characters, got {len(text)}")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate is a Python-only string: no database, key or document can hold it.
            raise ValueError(f"a memory id must be valid Unicode; {text!r} holds a lone surrogate") from None
    return text

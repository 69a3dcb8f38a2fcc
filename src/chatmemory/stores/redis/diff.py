"""The turn shortcut of a Redis write: a window that moved on by a few messages, found without the general diff.

:func:`window_shift` spots the common turn (the oldest messages dropped, new ones appended) in a few
comparisons; :func:`~chatmemory.core.sequence_diff.diff_messages` handles the rest. No I/O, no driver.
"""

from __future__ import annotations

from chatmemory.core.messages import ChatMessage, require_message
from chatmemory.serialization.native import dumps_message

__all__ = ["encode", "window_shift"]


def window_shift(old: tuple[ChatMessage, ...], new: tuple[ChatMessage, ...]) -> tuple[int, int] | None:
    """The common turn of a window memory, found without the general diff: ``(span, kept)`` or ``None``.

    When ``new`` starts with all of ``old`` but its first ``span`` messages (and then appends ``new[kept:]``),
    this is exactly the plan :func:`~chatmemory.core.sequence_diff.diff_messages` would make (delete the
    first ``span``, keep the rest in place, append the others), at the cost of a few comparisons instead
    of a walk over both lists; ``None`` sends the caller to the general diff.

    Why it is the same plan: the general diff keeps the longest prefix of ``new`` that is a subsequence of
    ``old``, at the latest positions. That prefix is at least ``old[span:]`` (``kept`` messages, kept at the
    last positions); it would be longer only if ``old[span:]`` also fitted into ``old[:-1]``, starting at
    or after ``span`` (``span`` is where ``new[0]`` first occurs): ``kept`` messages in ``kept - 1``
    places, impossible. Elements compare as in the general diff (the same object, or equal).
    """
    if not old or not new:
        return None
    try:
        span = old.index(new[0])
    except ValueError:
        return None
    kept = len(old) - span
    if kept > len(new) or old[span:] != new[:kept]:
        return None
    return span, kept


def encode(message: ChatMessage) -> bytes:
    """The stored record of ``message``.

    Raises:
        TypeError: ``message`` is not a chat message.
    """
    require_message(message)
    return dumps_message(message)

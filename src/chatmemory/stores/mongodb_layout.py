"""The pure part of the MongoDB store: how messages are laid out in a document, and the write plan.

The held system message is kept outside the ``messages`` array, because a window memory that keeps it
first evicts from position 1, not from the head; with the system message aside, every steady-state turn
(evict the oldest, append the newest) is a head trim of the array, which ``$push`` with
``$each``/``$slice`` does in one small ``update_one``. No I/O here, and no driver import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chatmemory.core.messages import ChatMessage, SystemMessage
from chatmemory.core.sequence_diff import diff_messages

__all__ = ["MongoLayout", "MongoWritePlan", "plan_layout", "plan_write"]


@dataclass(frozen=True, slots=True)
class MongoLayout:
    """How a list of messages is laid out in a document.

    Attributes:
        array: the messages in the ``messages`` array, in order.
        system: the message held outside the array (``None``: none).
        system_at: the held message's position in the full list.
    """

    array: tuple[ChatMessage, ...]
    system: ChatMessage | None = None
    system_at: int = 0

    def messages(self) -> list[ChatMessage]:
        """The full list, the held message put back at its position."""
        full = list(self.array)
        if self.system is not None:
            full.insert(self.system_at, self.system)
        return full


def plan_layout(messages: Sequence[ChatMessage]) -> MongoLayout:
    """Lay ``messages`` out: the first :class:`SystemMessage` is held aside, the rest go in the array."""
    for position, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            return MongoLayout(tuple(messages[:position]) + tuple(messages[position + 1 :]), message, position)
    return MongoLayout(tuple(messages))


@dataclass(frozen=True, slots=True)
class MongoWritePlan:
    """An in-place write: drop ``head_trim`` array elements from the head, append ``appended``.

    Attributes:
        head_trim: how many array elements go from the head.
        appended: the messages pushed onto the array.
        array_length: the array's length afterwards (the ``$slice`` bound).
        system_changed: whether the held message differs from the stored one.
    """

    head_trim: int
    appended: tuple[ChatMessage, ...]
    array_length: int
    system_changed: bool


def plan_write(old: MongoLayout, new: MongoLayout) -> MongoWritePlan | None:
    """The in-place write that turns ``old`` into ``new``, or ``None`` if the whole document must be written.

    In-place means the array loses only a head and gains only a tail (what ``$push`` with ``$each`` and a
    negative ``$slice`` does); the held message and its position are set regardless.
    """
    diff = diff_messages(old.array, new.array)
    if diff.head_trim is None:
        return None
    return MongoWritePlan(diff.head_trim, diff.appended, len(new.array), old.system != new.system)

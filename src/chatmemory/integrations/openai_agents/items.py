"""Session items and stored messages, both ways, without I/O: what a session's operations decide.

An OpenAI Agents SDK session holds Responses input items; the store holds chat messages. The mapping is
:func:`chatmemory.serialization.to_responses` / :func:`~chatmemory.serialization.from_responses`, which gives
every item back exactly. One message can hold several items (an ``AiMessage`` holds a turn's reasoning,
text and function calls), so the functions here count, append and pop *items* on a list of messages:

* :func:`append_items` reads an assistant turn that arrives in several batches into the same message as if
  it had arrived in one, so the turn's reasoning is evicted together with its calls;
* :func:`pop_last_item` takes one item off the end, splitting the last message when it holds several;
* :func:`last_items` converts only as many messages, from the end, as the ``limit`` needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chatmemory.core.errors import SerializationError
from chatmemory.core.messages import AiMessage, ChatMessage, ToolExecutionResultMessage
from chatmemory.serialization.responses import from_responses, to_responses

__all__ = ["Appended", "Popped", "append_items", "item_list", "last_items", "pop_last_item"]

_ANSWER_KINDS = frozenset({"reasoning", "function_call"})


def _is_answer(item: Mapping[str, Any]) -> bool:
    """Whether an item belongs to the model's answer (read into one ``AiMessage`` with its neighbours)."""
    kind = item.get("type")
    if kind in _ANSWER_KINDS:
        return True
    return kind in (None, "message") and item.get("role") == "assistant"


def item_list(items: object, session_id: str) -> list[dict[str, Any]]:
    """The items of one ``add_items`` call as a list of dicts (a generator is read once).

    Raises:
        TypeError: ``items`` is not a list of dicts, naming the session and the first bad position.
    """
    if isinstance(items, (str, bytes, Mapping)) or not hasattr(items, "__iter__"):
        raise TypeError(
            f"session {session_id!r}: add_items takes a list of Responses input items (dicts), "
            f"not a {type(items).__name__}"
        )
    listed = list(items)
    for position, item in enumerate(listed):
        if not isinstance(item, Mapping):
            raise TypeError(
                f"session {session_id!r}: item {position} given to add_items is a {type(item).__name__}, "
                "not a dict; pass items as dicts (item.model_dump(exclude_unset=True))"
            )
    return [dict(item) for item in listed]


def _items_of(messages: Sequence[ChatMessage], system_role: str) -> list[dict[str, Any]]:
    # A message with no Responses form (a custom message written by other code) is no session item.
    return to_responses(messages, system_role=system_role, skip_custom=True)


@dataclass(frozen=True, slots=True)
class Appended:
    """What appending items does to a stored list: keep ``kept`` as it is, then add ``added``.

    ``added`` starts with the stored last message read again together with the new items, when they
    continue the assistant turn it holds.
    """

    kept: list[ChatMessage]
    added: list[ChatMessage]


def append_items(stored: Sequence[ChatMessage], items: Sequence[Mapping[str, Any]], system_role: str) -> Appended:
    """The messages holding ``stored`` followed by ``items``, as if every item had come in one batch.

    An assistant turn can arrive split (reasoning, then calls): when the last stored message is an
    ``AiMessage`` read from items and the batch starts with more of the turn, both are read together, so
    the turn stays one message and :func:`to_responses` still gives exactly the items added.

    Raises:
        SerializationError: an entry is not a Responses item (naming its position).
    """
    tail = stored[-1] if stored else None
    if isinstance(tail, AiMessage) and items and _is_answer(items[0]):
        tail_items = to_responses([tail], system_role=system_role)
        # Only a message that its own items read back to is merged: a native AiMessage (thinking without
        # a reasoning item) would lose what items cannot carry.
        if from_responses(tail_items, system_role=system_role) == [tail]:
            merged = from_responses([*tail_items, *items], system_role=system_role)
            return Appended(list(stored[:-1]), _named(stored[:-1], merged))
    return Appended(list(stored), _named(stored, from_responses(items, system_role=system_role)))


def _named(stored: Sequence[ChatMessage], added: list[ChatMessage]) -> list[ChatMessage]:
    """``added`` with each tool output that has no tool name named after its stored call.

    Read in one batch, an output takes its name from the call before it; read in a later batch it would
    not see the call. The name is not part of the output item, so the items stay the same.
    """
    names: dict[str, str] = {}
    for message in stored:
        if isinstance(message, AiMessage):
            names.update((request.id, request.name) for request in message.tool_execution_requests if request.id)
    if not names:
        return added
    named: list[ChatMessage] = []
    for message in added:
        if isinstance(message, AiMessage):
            names.update((request.id, request.name) for request in message.tool_execution_requests if request.id)
        elif isinstance(message, ToolExecutionResultMessage) and message.tool_name is None and message.id in names:
            message = ToolExecutionResultMessage(
                message.id, names[message.id], message.text, message.is_error, message.attributes
            )
        named.append(message)
    return named


@dataclass(frozen=True, slots=True)
class Popped:
    """The outcome of popping: the list to store and the item taken, or ``None`` for an empty session."""

    messages: list[ChatMessage]
    item: dict[str, Any] | None


def pop_last_item(stored: Sequence[ChatMessage], system_role: str) -> Popped:
    """Take the most recent item off ``stored``.

    A last message holding several items (an ``AiMessage`` with N calls) gives back its last item and stays
    as the messages of the rest; a message with no item form is dropped on the way, as ``SQLiteSession``
    drops rows it cannot decode.
    """
    messages = list(stored)
    while messages:
        last = messages.pop()
        try:
            items = _items_of([last], system_role)
        except SerializationError:
            continue  # nothing a session can give back: dropped, as a row that does not decode
        if not items:
            continue
        if len(items) > 1:
            messages.extend(from_responses(items[:-1], system_role=system_role))
        return Popped(messages, items[-1])
    return Popped([], None)


def last_items(messages: Sequence[ChatMessage], limit: int | None, system_role: str) -> list[dict[str, Any]]:
    """The latest ``limit`` items of ``messages`` in chronological order (all with ``None``).

    As ``SQLiteSession``: a ``limit`` of zero or below gives no items. Only the messages from the end that
    hold the items wanted are converted.
    """
    if limit is None:
        return _items_of(messages, system_role)
    if limit <= 0:
        return []
    newest_first: list[list[dict[str, Any]]] = []
    count = 0
    for message in reversed(messages):
        items = _items_of([message], system_role)
        newest_first.append(items)
        count += len(items)
        if count >= limit:
            break
    chronological = [item for items in reversed(newest_first) for item in items]
    return chronological[-limit:]

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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from chatmemory.core.errors import SerializationError, UnencodableValueError
from chatmemory.core.messages import MAX_ATTRIBUTE_DEPTH, AiMessage, ChatMessage, ToolExecutionResultMessage
from chatmemory.serialization.responses import from_responses, to_responses

__all__ = ["Appended", "Popped", "append_items", "item_list", "last_items", "message_items", "pop_last_item"]

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
        UnencodableValueError: an item holds a value JSON cannot (a ``TypeError`` too, as the SDK's own
            sessions raise), naming the item and where in it; checked before anything is read or written.
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
        unencodable = _unencodable(dict(item), "", 0)
        if unencodable is not None:
            path, reason = unencodable
            where = f"item {position} given to add_items" + (f", at {path}," if path else "")
            raise UnencodableValueError(session_id, where, reason)
    return [dict(item) for item in listed]


# The values a message attribute can hold (chatmemory.core.messages): a 64-bit integer, unsigned too.
_MIN_INT = -(2**63)
_MAX_INT = 2**64 - 1


def _unencodable(value: Any, path: str, depth: int) -> tuple[str, str] | None:
    """Where in ``value`` (a subscript path) a value JSON cannot hold is, and what it is; ``None`` if nowhere.

    The same rules as message attributes, found before the conversion so that the error names the item:
    a ``str`` or ``int`` subclass (``StrEnum``) is its value, a plain ``Enum`` member is no JSON value.
    Nesting deeper than ``MAX_ATTRIBUTE_DEPTH`` is left to the conversion (it says so).
    """
    if value is None or isinstance(value, (str, bool)):
        return None
    if isinstance(value, int):
        return None if _MIN_INT <= value <= _MAX_INT else (path, f"an integer outside the 64-bit range ({value})")
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, f"a non-finite float ({value})")
    if isinstance(value, dict):
        if depth >= MAX_ATTRIBUTE_DEPTH:
            return None
        for key, inner in value.items():
            if not isinstance(key, str):
                return path, f"a dict with the non-str key {key!r}"
            found = _unencodable(inner, f"{path}[{key!r}]", depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(value, list):
        if depth >= MAX_ATTRIBUTE_DEPTH:
            return None
        for index, inner in enumerate(value):
            found = _unencodable(inner, f"{path}[{index}]", depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(value, tuple):
        return path, f"a tuple ({value!r:.60}); pass a list, which comes back as it went in"
    return path, f"a value of type {type(value).__name__} ({value!r:.60})"


def _items_of(messages: Sequence[ChatMessage], system_role: str) -> list[dict[str, Any]]:
    # A message with no Responses form (a custom message written by other code) is no session item. The
    # session hands items on as plain dicts, whatever the SDK's TypedDicts say.
    return cast("list[dict[str, Any]]", to_responses(messages, system_role=system_role, skip_custom=True))


def message_items(message: ChatMessage, system_role: str) -> list[dict[str, Any]]:
    """The items of one message (none for a custom message that keeps no item).

    Raises:
        SerializationError: the message has no Responses form.
    """
    return _items_of([message], system_role)


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
    not see the call. The name is not part of the output item, so the items stay the same. Only the calls
    of the unnamed outputs are looked up, from the newest stored message back (a call is usually among the
    last ones), so an append does not walk the whole session.
    """
    wanted = {
        message.id
        for message in added
        if isinstance(message, ToolExecutionResultMessage) and message.tool_name is None and message.id
    }
    if not wanted:
        return added
    names: dict[str, str] = {}
    stored_calls = False
    for message in reversed(stored):
        if isinstance(message, AiMessage):
            for request in reversed(message.tool_execution_requests):
                stored_calls = stored_calls or bool(request.id)
                # The newest call of an id names it, as a later call overrides an earlier one.
                if request.id in wanted and request.id not in names:
                    names[request.id] = request.name
            if len(names) == len(wanted):
                break
    if not stored_calls:
        return added  # as before: with no stored call, the batch's own reading stands
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

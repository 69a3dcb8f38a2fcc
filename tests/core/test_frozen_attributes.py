"""Message attributes cannot be changed after the message is built, at any depth."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from chatmemory import AiMessage, CustomMessage, InMemoryChatMemoryStore, MessageWindowChatMemory, UserMessage

MUTATIONS: list[Callable[[Any], object]] = [
    lambda a: a.__setitem__("n", 2),
    lambda a: a.__delitem__("n"),
    lambda a: a.update(n=3),
    lambda a: a.pop("n"),
    lambda a: a.setdefault("new", 1),
    lambda a: a.clear(),
    lambda a: a["items"].append(4),
    lambda a: a["items"].__setitem__(0, 9),
    lambda a: a["items"].sort(),
    lambda a: a["items"].extend([1]),
    lambda a: a["nested"].__setitem__("b", 3),
    lambda a: a["nested"]["deep"].insert(0, "x"),
]


@pytest.mark.parametrize("mutate", MUTATIONS)
@pytest.mark.parametrize("kind", [UserMessage, AiMessage, CustomMessage])
def test_attributes_are_read_only_at_every_depth(kind: type, mutate: Callable[[Any], object]) -> None:
    attributes = {"n": 1, "items": [3, 1, 2], "nested": {"b": 2, "deep": ["y"]}}
    message = CustomMessage(attributes) if kind is CustomMessage else kind("text", attributes=attributes)
    before = hash(message)
    with pytest.raises(TypeError, match="read-only"):
        mutate(message.attributes)
    assert message.attributes == attributes
    assert hash(message) == before


def test_a_message_read_from_a_store_cannot_change_the_store() -> None:
    store = InMemoryChatMemoryStore()
    memory = MessageWindowChatMemory("m", max_messages=5, store=store)
    memory.add(UserMessage("hi", attributes={"n": 1}))
    with pytest.raises(TypeError):
        memory.messages()[0].attributes["n"] = 999  # type: ignore[index]
    assert store.get_messages("m")[0].attributes == {"n": 1}


def test_frozen_attributes_behave_as_json_values() -> None:
    message = UserMessage("hi", attributes={"a": [1, {"b": 2}]})
    assert isinstance(message.attributes, dict)
    assert isinstance(message.attributes["a"], list)
    assert message.attributes == {"a": [1, {"b": 2}]}
    assert orjson.loads(orjson.dumps(message.attributes)) == {"a": [1, {"b": 2}]}
    assert pickle.loads(pickle.dumps(message)) == message
    assert copy.deepcopy(message) == message
    changed = dataclasses.replace(message, attributes={**message.attributes, "c": 3})
    assert changed.attributes == {"a": [1, {"b": 2}], "c": 3}
    assert message.attributes == {"a": [1, {"b": 2}]}

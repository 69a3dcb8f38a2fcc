"""Checks that what a converter writes is exactly what a provider SDK's request types describe."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from pydantic import TypeAdapter


def _materialized(value: Any) -> Any:
    # pydantic validates Iterable fields lazily (a ValidatorIterator): consume them so every item is checked.
    if isinstance(value, dict):
        return {key: _materialized(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, Iterator)):
        return [_materialized(item) for item in value]
    return value


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    # Building an adapter for a large union (every Responses item type) takes long: build each once.
    return TypeAdapter(kind)


def assert_conforms(kind: Any, value: Any) -> None:
    """``value`` validates as the SDK type ``kind``, with no key unknown to it and nothing coerced.

    TypedDict validation ignores unknown keys and drops them from its output, so comparing the output with
    the input catches a key the SDK does not define (it would be sent to the API unchecked).
    """
    # The adapter must outlive the lazy iterators it returns: they point into its schema definitions.
    adapter = _adapter(kind)
    validated = _materialized(adapter.validate_python(value, strict=True))
    assert validated == _materialized(value), f"{value!r} has keys or values {kind} does not define"

"""Fields of a provider's item that no message field holds, kept in attributes so the item can be rebuilt.

A converter that must give back exactly the items it was given (ids, statuses, opaque provider data) keeps
what it did not turn into message fields as a plain JSON value in the message's attributes, and merges it
back when writing. Attribute values are frozen on the message; :func:`thaw` turns them into plain dicts and
lists again, so what a converter hands to an SDK is mutable like anything else the application builds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["leftover", "thaw"]


def thaw(value: Any) -> Any:
    """A plain ``dict``/``list`` deep copy of a JSON-native value (frozen attribute values included)."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list):
        return [thaw(item) for item in value]
    return value


def leftover(data: Mapping[str, Any], converted: frozenset[str]) -> dict[str, Any]:
    """The fields of ``data`` other than ``converted``, as a plain deep copy."""
    return {key: thaw(value) for key, value in data.items() if key not in converted}

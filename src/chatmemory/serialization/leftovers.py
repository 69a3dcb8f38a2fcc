"""Fields of a provider's item that no message field holds, kept in attributes so the item can be rebuilt.

A converter that must give back exactly the items it was given (ids, statuses, opaque provider data) keeps
what it did not turn into message fields as a plain JSON value in the message's attributes, and merges it
back when writing. Attribute values are frozen on the message; :func:`thaw` turns them into plain dicts and
lists again, so what a converter hands to an SDK is mutable like anything else the application builds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["RecordDoesNotFit", "TextSlices", "leftover", "thaw"]


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


class RecordDoesNotFit(Exception):
    """A kept record no longer matches its message (the message was changed): write the message plainly."""


class TextSlices:
    """Hands out the consecutive pieces of a text, joined by ``separator``, whose lengths a record kept.

    Raises :class:`RecordDoesNotFit` when the text does not split that way.
    """

    def __init__(self, text: str | None, separator: str) -> None:
        self.text = text or ""
        self.separator = separator
        self.position = 0
        self.taken = 0

    def take(self, length: int) -> str:
        """The next piece, ``length`` characters long."""
        if self.taken:
            if not self.text.startswith(self.separator, self.position):
                raise RecordDoesNotFit
            self.position += len(self.separator)
        piece = self.text[self.position : self.position + length]
        if len(piece) != length:
            raise RecordDoesNotFit
        self.position += length
        self.taken += 1
        return piece

    def done(self) -> bool:
        """Whether every character was handed out."""
        return self.position == len(self.text)

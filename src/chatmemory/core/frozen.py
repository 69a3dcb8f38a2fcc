"""Read-only dicts and lists for message attributes.

They are real ``dict`` and ``list`` subclasses, so they compare equal to plain ones, pass ``isinstance``
checks and serialize as JSON; every method that would change them raises ``TypeError``. A message
handed out by a store or a cache can therefore be shared safely: nobody can change it under others.
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["FrozenDict", "FrozenList"]


def _read_only(*_: Any, **__: Any) -> NoReturn:
    raise TypeError(
        "message attributes are read-only; build a new message to change them "
        "(e.g. dataclasses.replace(message, attributes={**message.attributes, 'key': value}))"
    )


class FrozenDict(dict[str, Any]):
    """A ``dict`` that cannot be changed after it is built."""

    __slots__ = ()

    __setitem__ = __delitem__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only
    __ior__ = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self

    def __repr__(self) -> str:
        return dict.__repr__(self)


class FrozenList(list[Any]):
    """A ``list`` that cannot be changed after it is built."""

    __slots__ = ()

    __setitem__ = __delitem__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only
    __iadd__ = __imul__ = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList:
        return self

    def __repr__(self) -> str:
        return list.__repr__(self)

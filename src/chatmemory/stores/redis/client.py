"""The client a Redis store sends with, built from a URL or adopted, for both layouts and both executors.

:class:`ClientHolder` is the part of the stores' bases (:mod:`chatmemory.stores.redis.base`,
:mod:`chatmemory.stores.langchain4j_redis.base`) that takes ``url_or_client``: it builds the client from a
URL (the store owns it then), adopts one of the executor's client classes (the caller owns it) or refuses
anything else, and checks it before keeping it. No driver import and no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

__all__ = ["ClientHolder"]

_Client = TypeVar("_Client")


class ClientHolder(Generic[_Client]):
    """Holds the store's client and whether the store owns it; the executor names its client classes."""

    _repr_name: ClassVar[str]
    """The store's name in its ``repr``."""
    _client_types: ClassVar[tuple[type[Any], type[Any]]]
    """The standalone and the cluster client class the executor sends with."""
    _wrong_client: ClassVar[str]
    """The ``TypeError`` message for a ``url_or_client`` of another type (``{name}``: its type's name)."""

    def _hold(self, url_or_client: str | _Client, build: Callable[[str], Any], check: Callable[[Any], None]) -> None:
        """Keep the client ``build`` makes from a URL, or the one given, once ``check`` accepts it.

        Raises:
            TypeError: ``url_or_client`` is neither a URL nor one of the executor's clients.
            ValueError: ``check`` refused the client (an owned one is let go first).
        """
        client: Any
        self._build = build
        if isinstance(url_or_client, str):
            client = build(url_or_client)
            self._url: str | None = url_or_client
            self._owns_client = True
        elif isinstance(url_or_client, self._client_types):
            client = url_or_client
            self._url = None
            self._owns_client = False
        else:
            raise TypeError(self._wrong_client.format(name=type(url_or_client).__name__))
        try:
            check(client)
        except ValueError:
            self._discard(client)
            raise
        self._client: _Client = client
        self._cluster = isinstance(client, self._client_types[1])
        self._started()

    def _another_client(self) -> Any:
        """One more client like the first, from the URL the store was built from (``None``: given a client)."""
        return None if self._url is None else self._build(self._url)

    def _discard(self, client: Any) -> None:
        """Let go of a client the store will not use (the executor closes an owned one if it can)."""

    def _started(self) -> None:
        """Set up what the executor needs once the client is known."""

    @property
    def client(self) -> _Client:
        """The redis-py client the store uses."""
        return self._client

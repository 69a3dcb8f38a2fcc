"""Store URLs on the command line: which kind of store a URL names, its namespace options, and opening it.

Every command takes a store URL plus the namespace options of the store it names, as the store classes
take them: ``--key-prefix`` (Redis), ``--table-prefix`` (SQL), ``--database``/``--collection`` (MongoDB).
An option that does not fit the URL's kind is a usage error, not silently ignored: an operator who
typed ``--table-prefix`` against Redis is looking at the wrong keys.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import click
import orjson

from chatmemory.core.store import ChatMemoryStore

__all__ = [
    "NAMESPACE_OPTIONS",
    "StoreOpener",
    "default_store_opener",
    "namespace_options",
    "store_kind",
    "url_for_display",
]

NAMESPACE_OPTIONS: dict[str, tuple[str, ...]] = {
    "redis": ("key_prefix",),
    "langchain4j_redis": ("key_prefix",),
    "sql": ("table_prefix",),
    "mongodb": ("database", "collection"),
    "memory": (),
}
"""Store kind (what :func:`store_kind` names) → the constructor options that choose its namespace.

Every module :data:`chatmemory.stores.url.STORE_SCHEMES` maps a scheme to has an entry (a test holds them to it)."""

UNSEALED_KINDS = frozenset({"langchain4j_redis"})
"""Kinds of store with no ``encryption=``: the LangChain4j layout is read by a JVM peer as it is."""


def load_keyring(path: str) -> Any:
    """The :class:`~chatmemory.encryption.Keyring` a JSON file describes (never printed: it holds keys).

    The file: ``{"primary": "<key id>", "keys": {"<key id>": "<32 bytes, base64>", ...}}``, and
    ``"read_plaintext": true`` while migrating a plain store.

    Raises:
        click.BadParameter: the file cannot be read or does not describe a keyring.
    """
    import base64
    import binascii

    from chatmemory.encryption import Keyring

    try:
        with open(path, "rb") as file:
            document = orjson.loads(file.read())
        keys = {str(key_id): base64.b64decode(value, validate=True) for key_id, value in document["keys"].items()}
        return Keyring(keys, document["primary"], read_plaintext=bool(document.get("read_plaintext", False)))
    except OSError as exc:
        raise click.BadParameter(f"cannot read keyring file {path!r}: {exc.strerror}", param_hint="--keyring") from None
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError, binascii.Error) as exc:
        reason = f"missing {exc}" if isinstance(exc, KeyError) else str(exc).split(":")[0]
        raise click.BadParameter(
            f"{path!r} is not a keyring file ({reason}): expected "
            '{"primary": "<key id>", "keys": {"<key id>": "<32 bytes, base64>"}}',
            param_hint="--keyring",
        ) from None


StoreOpener = Callable[[str, Mapping[str, Any]], contextlib.AbstractContextManager[ChatMemoryStore]]
"""``(url, options) -> context manager of a store``: how commands open stores (tests pass their own)."""


def store_kind(url: str) -> str:
    """``redis``, ``langchain4j_redis``, ``sql``, ``mongodb`` or ``memory``: the kind of store a URL names.

    Raises:
        click.BadParameter: the URL has no scheme, or no store serves its scheme.
    """
    from chatmemory.stores.url import STORE_SCHEMES

    scheme = urlsplit(url).scheme.lower()
    if not scheme:
        raise click.BadParameter(f"{url!r} is not a store URL (it has no scheme, e.g. redis://localhost:6379/0)")
    target = STORE_SCHEMES.get(scheme) or STORE_SCHEMES.get(scheme.split("+", 1)[0])
    if target is None:
        known = ", ".join(sorted(STORE_SCHEMES))
        raise click.BadParameter(f"no chatmemory store for URL scheme {scheme!r}; known schemes: {known}")
    # "chatmemory.stores.redis:RedisChatMemoryStore" (or a module inside that package) → "redis"
    module = target.split(":", 1)[0]
    return module.removeprefix("chatmemory.stores.").split(".", 1)[0]


def url_for_display(url: str) -> str:
    """``url`` with any password replaced by ``***``, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def namespace_options(url: str, given: Mapping[str, Any], *, side: str = "") -> dict[str, Any]:
    """The constructor options among ``given`` (``None``: not given) for the store ``url`` names.

    Raises:
        click.UsageError: an option given does not fit the URL's kind of store.
    """
    kind = store_kind(url)
    fitting = NAMESPACE_OPTIONS[kind]
    options: dict[str, Any] = {}
    for name, value in given.items():
        if value is None:
            continue
        if name == "keyring" and kind not in UNSEALED_KINDS:
            options["encryption"] = load_keyring(value)
            continue
        if name not in fitting:
            flag = "--" + (f"{side}-" if side else "") + name.replace("_", "-")
            raise click.UsageError(f"{flag} does not apply to {url_for_display(url)} (a {kind} store)")
        options[name] = value
    return options


@contextlib.contextmanager
def _open_and_close(url: str, options: Mapping[str, Any]) -> Iterator[ChatMemoryStore]:
    from chatmemory.stores.url import open_store

    store = open_store(url, **options)
    try:
        yield store
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()


default_store_opener: StoreOpener = _open_and_close
"""Opens the store with :func:`chatmemory.open_store` and closes it afterwards."""


@dataclass(frozen=True)
class CommandContext:
    """What every command gets from ``main``: how to open stores."""

    open_store: StoreOpener = default_store_opener

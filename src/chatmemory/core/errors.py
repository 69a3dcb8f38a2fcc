"""The error tree. Every message is built here and names the memory id and what to do next."""

from __future__ import annotations

import re
from importlib import metadata
from typing import Final

__all__ = [
    "ChatMemoryError",
    "ConcurrentUpdateError",
    "CorruptedMemoryError",
    "EncryptionError",
    "EncryptionKeyError",
    "MissingDependencyError",
    "Operation",
    "PlaintextRecordError",
    "SchemaVersionError",
    "SerializationError",
    "StoreError",
    "UnencodableValueError",
    "UnsupportedFormatVersionError",
    "install_hint",
]

DISTRIBUTION = "llm-window-memory"
"""The distribution this package is installed from (``chatmemory`` on the index is another project)."""

_EXTRA_MARKER = re.compile(r"""extra\s*==\s*['"]([^'"]+)['"]""")


def _extra_packages(extra: str, seen: frozenset[str] = frozenset()) -> list[str]:
    """The requirements the installed distribution lists for ``extra``, its own extras expanded."""
    try:
        requires = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return []
    packages: list[str] = []
    for requirement in requires:
        spec, _, marker = requirement.partition(";")
        found = _EXTRA_MARKER.search(marker)
        if found is None or found.group(1) != extra:
            continue
        spec = spec.strip().replace(" ", "")
        if spec.startswith(f"{DISTRIBUTION}["):
            for inner in spec[len(DISTRIBUTION) + 1 : -1].split(","):
                if inner not in seen:
                    packages += _extra_packages(inner, seen | {extra})
        else:
            packages.append(spec)
    return list(dict.fromkeys(packages))


def install_hint(extra: str) -> str:
    """How to install ``extra`` today: the distribution is not on the package index yet.

    ``pip install 'llm-window-memory[extra]'`` works once it is published; until then, from a clone of the
    repository or with a built wheel, or by installing the extra's packages themselves (listed when the
    package is installed, from its metadata).
    """
    packages = " ".join(f"'{package}'" for package in _extra_packages(extra))
    its_packages = f"; or its packages: pip install {packages}" if packages else ""
    return (
        f"pip install '{DISTRIBUTION}[{extra}]' (not on PyPI yet: pip install '.[{extra}]' in a clone of the "
        f"repository, or 'path/to/llm_window_memory-<version>-py3-none-any.whl[{extra}]' for a built "
        f"wheel{its_packages})"
    )


class ChatMemoryError(Exception):
    """Base class of every error this library raises on purpose."""


class StoreError(ChatMemoryError):
    """A store's driver or server failed; the driver's exception is the ``__cause__``."""

    def __init__(self, operation: str, memory_id: str | None = None, detail: str | None = None) -> None:
        self.operation = operation
        self.memory_id = memory_id
        where = f" for memory {memory_id!r}" if memory_id is not None else ""
        super().__init__(f"{operation} failed{where}" + (f": {detail}" if detail else ""))


class SerializationError(ChatMemoryError):
    """Messages could not be encoded, or a payload could not be decoded.

    A value that JSON cannot hold raises the subclass :class:`UnencodableValueError`, also a ``TypeError``.
    """


class UnencodableValueError(SerializationError, TypeError):
    """A value given to be stored cannot be encoded as JSON (a set, bytes, a datetime, NaN, an object, ...).

    Also a ``TypeError``, as ``json.dumps`` raises for such a value and the OpenAI Agents SDK's own sessions
    with it: code written against them (``except TypeError``) catches it, and so does
    ``except SerializationError``. Nothing was written. Pass JSON-native values only: ``str``, ``int``
    (64-bit), finite ``float``, ``bool``, ``None``, ``list`` and ``dict`` with ``str`` keys.
    """

    def __init__(self, memory_id: str | None, where: str, reason: str) -> None:
        self.memory_id = memory_id
        self.where = where
        self.reason = reason
        subject = f"memory {memory_id!r}: " if memory_id is not None else ""
        super().__init__(
            f"{subject}{where} cannot be encoded as JSON: {reason}. Nothing was written; pass JSON-native "
            "values only (str, int, float, bool, None, list, dict with str keys)"
        )


class CorruptedMemoryError(SerializationError):
    """Stored data is not a valid payload. Nothing was changed; the data is left for inspection.

    Recover by reading the raw data, or by ``delete_messages``/``update_messages`` on the memory.
    """

    def __init__(self, memory_id: str | None, reason: str) -> None:
        self.memory_id = memory_id
        self.reason = reason
        subject = f"memory {memory_id!r}" if memory_id is not None else "payload"
        super().__init__(
            f"stored data of {subject} is corrupted: {reason}. Nothing was changed; inspect the raw data, "
            "or call delete_messages() / update_messages() on that memory to replace it"
        )


class EncryptionError(SerializationError):
    """A store built with ``encryption=`` cannot open what it holds. Nothing was changed."""


class EncryptionKeyError(EncryptionError):
    """A record is sealed under a key the keyring lacks (rotated out, never given, or destroyed).

    Nothing was changed and nothing was skipped: add the key to the keyring (or, for a key destroyed on
    purpose, delete the memory).
    """

    def __init__(self, memory_id: str | None, key_id: str) -> None:
        self.memory_id = memory_id
        self.key_id = key_id
        subject = f"memory {memory_id!r}" if memory_id is not None else "a payload"
        super().__init__(
            f"{subject} holds a record sealed under key {key_id!r}, which the keyring does not have. Nothing "
            "was changed; add that key to the Keyring to read it (the chatmemory command: --keyring FILE), or delete "
            "the memory if the key was destroyed"
        )


class PlaintextRecordError(EncryptionError):
    """An encrypted store found a record that is not sealed. Nothing was changed.

    While migrating a plain store, build the keyring with ``read_plaintext=True`` and run
    ``chatmemory rekey`` to seal what it holds.
    """

    def __init__(self, memory_id: str | None) -> None:
        self.memory_id = memory_id
        subject = f"memory {memory_id!r}" if memory_id is not None else "a payload"
        super().__init__(
            f"{subject} holds a record that is not encrypted, and this store's keyring refuses plain data. Nothing "
            "was changed; to migrate, build the Keyring with read_plaintext=True and run 'chatmemory rekey URL'"
        )


class UnsupportedFormatVersionError(SerializationError):
    """The payload was written by a newer chatmemory (a format version this one does not know)."""

    def __init__(self, memory_id: str | None, version: object, supported: int) -> None:
        self.memory_id = memory_id
        self.version = version
        self.supported = supported
        subject = f"memory {memory_id!r}" if memory_id is not None else "payload"
        super().__init__(
            f"{subject} was written in format version {version!r}, but this chatmemory reads versions up to "
            f"{supported}. Upgrade chatmemory (pip install -U llm-window-memory once it is on PyPI; until then "
            "pip install -U . in an up-to-date clone of the repository) to read it; nothing was changed"
        )


class ConcurrentUpdateError(ChatMemoryError):
    """The memory changed between read and write (a stale version), or kept changing on every retry."""

    def __init__(self, memory_id: str, expected_version: int | None = None, attempts: int | None = None) -> None:
        self.memory_id = memory_id
        self.expected_version = expected_version
        self.attempts = attempts
        if attempts is not None:
            text = (
                f"memory {memory_id!r} changed concurrently on each of {attempts} attempts; "
                "nothing was written. Retry later or reduce the number of writers to this memory"
            )
        else:
            text = (
                f"memory {memory_id!r} is no longer at version {expected_version}; another writer "
                "changed it and nothing was written. Reload it and apply the change again"
            )
        super().__init__(text)


class SchemaVersionError(StoreError):
    """The database schema is older (or newer) than this chatmemory expects."""

    def __init__(self, found: str | None, expected: str, command: str) -> None:
        self.found = found
        self.expected = expected
        self.command = command
        ChatMemoryError.__init__(
            self,
            f"the chatmemory schema is at revision {found or 'none'}, but this version needs {expected}. "
            f"Run: {command}",
        )
        self.operation = "schema check"
        self.memory_id = None


class MissingDependencyError(ChatMemoryError, ImportError):
    """An optional driver is not installed; the message names the extra to install."""

    def __init__(self, feature: str, extra: str, module: str) -> None:
        self.feature = feature
        self.extra = extra
        ChatMemoryError.__init__(
            self,
            f"{feature} requires the '{extra}' extra: {install_hint(extra)}; module {module!r} is not installed",
        )
        self.name = module


class HistoryNotEnabledError(ChatMemoryError):
    """A history read or trim on a store built without ``history=True``."""

    def __init__(self, store: str) -> None:
        self.store = store
        super().__init__(
            f"{store} keeps no history: build it with history=True (or history_ttl=...) to read or trim one"
        )


class MessageTooLargeError(ChatMemoryError):
    """A message alone is larger than the whole window (raised by memories built with ``on_oversized="raise"``)."""

    def __init__(self, memory_id: str, size: int, limit: int, unit: str = "tokens") -> None:
        self.memory_id = memory_id
        self.size = size
        self.limit = limit
        self.unit = unit
        super().__init__(
            f"a message of {size} {unit} does not fit memory {memory_id!r}, whose window holds at most {limit} "
            f"{unit}; nothing was written. Shorten or split the message, or raise the limit"
        )


class Operation:
    """Operation names, one wording for every backend: ``StoreError(Operation.READ, memory_id, detail)``."""

    CONNECT: Final = "connecting to the store"
    READ: Final = "reading the memory"
    WRITE: Final = "writing the memory"
    DELETE: Final = "deleting the memory"
    LIST: Final = "listing memory ids"
    PURGE: Final = "purging expired memories"
    TRIM: Final = "trimming the history"
    SCHEMA: Final = "checking the schema"
    CLOSE: Final = "closing the store"

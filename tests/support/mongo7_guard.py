"""A pymongo command listener that catches anything MongoDB 7.0 would reject.

The test server may be newer than 7.0 (or, like SecantusDB, claim to be), so a store could pass every
test while sending an 8.0-only command or option. The guard sees every command the client sends and
records each violation; :meth:`Mongo7Guard.check` raises with the list, and the test backend calls it
when a test's store is closed, so the test fails.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

from pymongo import monitoring

# Commands MongoDB added after 7.0.
COMMANDS_AFTER_7: frozenset[str] = frozenset(
    {
        "bulkWrite",  # 8.0 (MongoClient.bulk_write)
        "setQuerySettings",  # 8.0
        "removeQuerySettings",  # 8.0
        "autoCompact",  # 8.0
    }
)

# Aggregation operators and stages (usable in update pipelines and queries) added after 7.0.
OPERATORS_AFTER_7: frozenset[str] = frozenset(
    {
        "$toUUID",  # 8.0
        "$queryStats",  # 8.0 (stage)
        "$rankFusion",  # 8.1
        "$scoreFusion",  # 8.2
        "$score",  # 8.2
        "$minMaxScaler",  # 8.2
        "$sigmoid",  # 8.2
        "$listClusterCatalog",  # 8.1
    }
)

# Options of write statements added after 7.0, by command and by the array holding the statements.
STATEMENT_OPTIONS_AFTER_7: dict[str, tuple[str, frozenset[str]]] = {
    "update": ("updates", frozenset({"sort"})),  # 8.0: sort= on update_one / replace_one
}

# A standalone mongod has no multi-document transactions; a store must not need them.
TRANSACTION_FIELDS: frozenset[str] = frozenset({"startTransaction", "autocommit"})
TRANSACTION_COMMANDS: frozenset[str] = frozenset({"commitTransaction", "abortTransaction"})


def _keys(value: Any) -> Iterator[str]:
    """Every mapping key anywhere inside ``value`` (operators are keys)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield key
            yield from _keys(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _keys(item)


def violations_of(command_name: str, command: Mapping[str, Any]) -> list[str]:
    """What in one command MongoDB 7.0 rejects (empty: nothing)."""
    found: list[str] = []
    if command_name in COMMANDS_AFTER_7:
        found.append(f"command {command_name!r} does not exist before MongoDB 8.0")
    if command_name in TRANSACTION_COMMANDS or TRANSACTION_FIELDS & set(command):
        found.append(f"{command_name!r} uses a multi-document transaction (a standalone mongod has none)")
    if command_name in STATEMENT_OPTIONS_AFTER_7:
        array, options = STATEMENT_OPTIONS_AFTER_7[command_name]
        found.extend(
            f"{command_name!r} statement option {option!r} needs MongoDB 8.0"
            for statement in command.get(array, ())
            for option in sorted(options & set(statement))
        )
    found.extend(
        f"{command_name!r} uses {operator!r}, which MongoDB 7.0 does not know"
        for operator in sorted(OPERATORS_AFTER_7 & set(_keys(command)))
    )
    return found


class Mongo7Guard(monitoring.CommandListener):
    """Records every command or option a MongoDB 7.0 server would reject."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._violations: list[str] = []
        self.commands_seen = 0

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        found = violations_of(event.command_name, event.command)
        with self._lock:
            self.commands_seen += 1
            self._violations.extend(found)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def take(self) -> list[str]:
        """The violations recorded since the last call (and forget them)."""
        with self._lock:
            found, self._violations = self._violations, []
        return found

    def check(self) -> None:
        """Raise ``AssertionError`` listing the violations since the last check."""
        found = self.take()
        if found:
            raise AssertionError("sent to MongoDB what MongoDB 7.0 rejects:\n  " + "\n  ".join(found))

"""Upgrades from older native format versions to the current one.

Readers accept every version up to :data:`FORMAT_VERSION`; each older version has one function here that
turns its message object into the next version's. Writers only ever write the current version. The
golden files under ``tests/serialization/golden/v<N>/`` must keep loading forever.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["FORMAT_VERSION", "UPGRADERS", "upgrade_message"]

FORMAT_VERSION = 1
"""The version every payload is written in."""

UPGRADERS: dict[int, Callable[[Any], Any]] = {}
"""``UPGRADERS[n]`` turns a version-``n`` message object into a version-``n + 1`` one."""


def upgrade_message(data: Any, version: int) -> Any:
    """Bring a message object of format ``version`` up to :data:`FORMAT_VERSION`."""
    while version < FORMAT_VERSION:
        data = UPGRADERS[version](data)
        version += 1
    return data

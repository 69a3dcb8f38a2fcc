"""The ``chatmemory`` command."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run the ``chatmemory`` command."""
    return 0

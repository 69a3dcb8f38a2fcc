"""Importing optional drivers with an error that says which extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from chatmemory.core.errors import MissingDependencyError

__all__ = ["require"]


def require(module: str, *, feature: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`~chatmemory.MissingDependencyError` naming ``extra``.

    Example message: ``RedisChatMemoryStore requires the 'redis' extra: pip install 'llm-window-memory[redis]'``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(feature, extra, module) from exc

"""The Lua scripts of the Redis store, read from the ``.lua`` files beside this module.

``head.lua`` (the layout, the server clock, the ttl check and the judgement of a memory's head) is put
before each of ``read.lua``, ``write.lua``, ``times.lua``, ``expire.lua``, ``history.lua`` and
``trim.lua``; each result is one script, run as one atomic round trip.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib.resources import files

__all__ = ["EXPIRE", "HISTORY", "READ", "TIMES", "TRIM", "WRITE", "LuaScript"]


@dataclass(frozen=True, slots=True)
class LuaScript:
    """One script: its name, its source and the SHA1 that ``EVALSHA`` names it by.

    Attributes:
        name: the file it comes from, without ``.lua``.
        source: the whole text sent by ``EVAL``.
        sha: the hex SHA1 of ``source``.
    """

    name: str
    source: str
    sha: str

    @classmethod
    def with_head(cls, name: str, head: str, body: str) -> LuaScript:
        """The script ``name`` of ``head.lua``'s text ``head`` and its own file's text ``body``."""
        source = head + "\n" + body
        return cls(name, source, hashlib.sha1(source.encode("utf-8")).hexdigest())  # Redis names scripts by SHA1


def _load(name: str) -> LuaScript:
    here = files(__name__)
    return LuaScript.with_head(
        name, here.joinpath("head.lua").read_text("utf-8"), here.joinpath(f"{name}.lua").read_text("utf-8")
    )


READ = _load("read")
WRITE = _load("write")
TIMES = _load("times")
EXPIRE = _load("expire")
HISTORY = _load("history")
TRIM = _load("trim")

"""The Lua scripts of the Redis store, read from the ``.lua`` files beside this module.

``head.lua`` (the layout, the server clock, the ttl check and the judgement of a memory's head) is put
before each of ``read.lua``, ``write.lua``, ``times.lua``, ``stored.lua`` (one memory of a batch read: the
read and the times in one run), ``expire.lua``, ``history.lua``, ``trim.lua`` and ``restore.lua``; each
result is one script, run as one atomic round trip. ``unlock.lua`` (giving back a memory's lease lock) and
``reseal.lua`` (re-sealing list elements in place) stand alone.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib.resources import files

__all__ = [
    "EXPIRE",
    "HISTORY",
    "READ",
    "RESEAL",
    "RESTORE",
    "STORED",
    "TIMES",
    "TRIM",
    "UNLOCK",
    "WRITE",
    "LuaScript",
]


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
        return cls.of(name, head + "\n" + body)

    @classmethod
    def of(cls, name: str, source: str) -> LuaScript:
        """The script ``name`` whose whole text is ``source``."""
        return cls(name, source, hashlib.sha1(source.encode("utf-8")).hexdigest())  # Redis names scripts by SHA1


def _load(name: str) -> LuaScript:
    here = files(__name__)
    return LuaScript.with_head(
        name, here.joinpath("head.lua").read_text("utf-8"), here.joinpath(f"{name}.lua").read_text("utf-8")
    )


READ = _load("read")
WRITE = _load("write")
TIMES = _load("times")
STORED = _load("stored")
EXPIRE = _load("expire")
HISTORY = _load("history")
TRIM = _load("trim")
RESTORE = _load("restore")
UNLOCK = LuaScript.of("unlock", files(__name__).joinpath("unlock.lua").read_text("utf-8"))
RESEAL = LuaScript.of("reseal", files(__name__).joinpath("reseal.lua").read_text("utf-8"))

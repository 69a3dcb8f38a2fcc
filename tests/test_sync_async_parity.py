"""Every sync class or function and its asyncio twin: the same public names, parameters and docstrings.

The pairs are found by name: each store facade of ``chatmemory.stores.<backend>`` and the class of the
same name in ``chatmemory.aio.stores.<backend>``; every name that ``chatmemory`` and ``chatmemory.aio``
both export (the memories, the provider, the store protocols, ``open_store``); the protocols of
``chatmemory.aio.store`` and their sync homes (``chatmemory.core.store``, ``chatmemory.core.history``,
``chatmemory.memory_times``, ``chatmemory.core.recorded_writes``); ``UrlStore``; the edit functions.
Compared, ``async`` aside: the public members and their kinds, each method's parameters (names,
kinds, defaults; annotations are not compared) and each docstring, after ``normalised``. A difference
that is meant is listed in ``KNOWN_DIFFERENCES`` with its reason: the test fails on any other, and on
an entry that no longer differs.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable, Iterator
from typing import Any

import chatmemory
import chatmemory.aio
import chatmemory.aio.stores
from chatmemory import memory_times as sync_times
from chatmemory.aio.store import SupportsExpiryAt, SupportsExpiryPurge, SupportsMemoryTimes
from chatmemory.aio.stores.memory import InMemoryChatMemoryStore
from chatmemory.core import store as sync_store

# Where the sync twin of a protocol of chatmemory.aio.store lives.
SYNC_PROTOCOL_HOMES = [
    "chatmemory.core.store",
    "chatmemory.core.history",
    "chatmemory.memory_times",
    "chatmemory.core.recorded_writes",
]
# Modules whose exported names pair with the same names of an asyncio module.
MODULE_PAIRS = [
    ("chatmemory.stores.url", "chatmemory.aio.url"),
    ("chatmemory.core.edits", "chatmemory.aio.edits"),
]
# The asyncio name of a sync member, where Python's convention renames it (``aclose``, as in contextlib).
RENAMED = {"close": "aclose"}

# Differences known today, each with why (none at present). Keys are what ``differences()`` reports. Align
# a pair and its entry must go (the test fails while it stays); a new difference fails until aligned or
# listed here.
KNOWN_DIFFERENCES: dict[str, str] = {}


# The modules a protocol's cross-reference may name: the twins' homes and the packages exporting them.
_TWIN_MODULE = re.compile(
    r"\bchatmemory\.(?:aio\.store|aio|core\.store|core\.history|core\.recorded_writes|memory_times)\.(?=[A-Z])"
)


def normalised(text: str | None) -> str:
    """A docstring with what legitimately differs between twins taken out.

    * whitespace runs are one space (the twins' lines may wrap differently);
    * ``await`` (bare or as ````await````) before a call is dropped;
    * ``aclose`` reads ``close`` and ``async with`` reads ``with`` (the renamed lifecycle);
    * a cross-reference to a class names it by its public name, whichever twin it points at
      (``chatmemory.aio.store.SupportsHistoryRestore`` and ``chatmemory.core.history.SupportsHistoryRestore``
      both read ``chatmemory.SupportsHistoryRestore``), and without a leading ``~``.
    """
    if not text:
        return ""
    text = _TWIN_MODULE.sub("chatmemory.", text).replace("`~", "`")
    text = re.sub(r"``await ([^`]*)``", r"``\1``", text)
    text = re.sub(r"\bawait\s+", "", text)
    text = re.sub(r"\baclose\b", "close", text)
    text = re.sub(r"\basync with\b", "with", text)
    return " ".join(text.split())


def _ours(value: object) -> bool:
    module = getattr(value, "__module__", None) or ""
    return module == "chatmemory" or module.startswith("chatmemory.")


def pairs() -> dict[str, tuple[Any, Any]]:
    """Each sync object and its asyncio twin, under the twin's dotted name."""
    found: dict[str, tuple[Any, Any]] = {}
    seen: set[tuple[int, int]] = set()

    def add(sync: Any, asynchronous: Any, label: str) -> None:
        if sync is asynchronous or (id(sync), id(asynchronous)) in seen:
            return  # one object serves both (Snapshot), or the pair is in already
        if not (_ours(sync) and _ours(asynchronous)):
            return  # a driver's class re-exported (redis.Redis)
        seen.add((id(sync), id(asynchronous)))
        found[label] = (sync, asynchronous)

    def exported(module_name: str) -> dict[str, Any]:
        module = importlib.import_module(module_name)
        return {name: getattr(module, name) for name in getattr(module, "__all__", [])}

    for info in pkgutil.iter_modules(chatmemory.aio.stores.__path__):
        sync_name, async_name = f"chatmemory.stores.{info.name}", f"chatmemory.aio.stores.{info.name}"
        if importlib.util.find_spec(sync_name) is None:
            continue
        sync, asynchronous = exported(sync_name), exported(async_name)
        for name in sorted(set(sync) & set(asynchronous)):
            if inspect.isclass(asynchronous[name]):
                add(sync[name], asynchronous[name], f"{async_name}.{name}")
    sync, asynchronous = exported("chatmemory"), exported("chatmemory.aio")
    for name in sorted(set(sync) & set(asynchronous)):
        add(sync[name], asynchronous[name], f"chatmemory.aio.{name}")
    homes = [exported(name) for name in SYNC_PROTOCOL_HOMES]
    for name, value in sorted(exported("chatmemory.aio.store").items()):
        twins = [home[name] for home in homes if name in home]
        if inspect.isclass(value) and twins:
            add(twins[0], value, f"chatmemory.aio.store.{name}")
    for sync_name, async_name in MODULE_PAIRS:
        sync, asynchronous = exported(sync_name), exported(async_name)
        for name in sorted(set(sync) & set(asynchronous)):
            add(sync[name], asynchronous[name], f"{async_name}.{name}")
    return found


def unpaired_protocols() -> list[str]:
    """The protocols of the sync homes that ``chatmemory.aio.store`` has no twin of."""
    twins = set(importlib.import_module("chatmemory.aio.store").__all__)
    missing = []
    for home in SYNC_PROTOCOL_HOMES:
        module = importlib.import_module(home)
        for name in getattr(module, "__all__", []):
            value = getattr(module, name)
            if getattr(value, "_is_protocol", False) and name not in twins:
                missing.append(f"{home}.{name}")
    return missing


def _kind(raw: object) -> str:
    if isinstance(raw, (property, functools.cached_property)):
        return "property"
    if isinstance(raw, classmethod):
        return "classmethod"
    if isinstance(raw, staticmethod):
        return "staticmethod"
    if inspect.isfunction(raw):
        return "method"
    return "attribute"


def members(cls: type) -> dict[str, tuple[str, Any]]:
    """The public members of ``cls`` (and ``__init__`` of a concrete class): name -> (kind, value)."""
    found = {}
    protocol = getattr(cls, "_is_protocol", False)
    for name in dir(cls):
        if name.startswith("_") and (name != "__init__" or protocol):
            continue
        raw = inspect.getattr_static(cls, name)
        if name == "__init__" and raw is object.__init__:
            continue
        found[name] = (_kind(raw), getattr(cls, name))
    return found


_STARS: dict[inspect._ParameterKind, str] = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}


def parameters(function: Callable[..., Any]) -> str:
    """The parameters of ``function``: names, kinds and defaults, annotations left out."""
    shown = []
    for parameter in inspect.signature(function).parameters.values():
        prefix = _STARS.get(parameter.kind, "")
        text = prefix + parameter.name
        if parameter.default is not inspect.Parameter.empty:
            text += f"={parameter.default!r}"
        shown.append((parameter.kind, text))
    # The markers of positional-only and keyword-only parameters, as a signature shows them.
    out: list[str] = []
    for index, (kind, text) in enumerate(shown):
        previous = shown[index - 1][0] if index else None
        if kind == inspect.Parameter.KEYWORD_ONLY and previous not in (
            inspect.Parameter.KEYWORD_ONLY,
            inspect.Parameter.VAR_POSITIONAL,
        ):
            out.append("*")
        out.append(text)
        following = shown[index + 1][0] if index + 1 < len(shown) else None
        if kind == inspect.Parameter.POSITIONAL_ONLY and following != inspect.Parameter.POSITIONAL_ONLY:
            out.append("/")
    return "(" + ", ".join(out) + ")"


def _function(value: Any) -> Callable[..., Any] | None:
    if isinstance(value, (property, functools.cached_property)):
        return None
    return value if callable(value) and not inspect.isclass(value) else None


def _compare(label: str, sync: Any, asynchronous: Any) -> Iterator[tuple[str, str]]:
    if normalised(inspect.getdoc(sync)) != normalised(inspect.getdoc(asynchronous)):
        yield f"{label}: docstring", _doc_detail(sync, asynchronous)
    sync_function, async_function = _function(sync), _function(asynchronous)
    if sync_function is not None and async_function is not None:
        sync_parameters, async_parameters = parameters(sync_function), parameters(async_function)
        if sync_parameters != async_parameters:
            yield f"{label}: parameters", f"sync {sync_parameters} / async {async_parameters}"


def _doc_detail(sync: Any, asynchronous: Any) -> str:
    left, right = normalised(inspect.getdoc(sync)), normalised(inspect.getdoc(asynchronous))
    start = next((i for i, (a, b) in enumerate(zip(left, right, strict=False)) if a != b), min(len(left), len(right)))
    return f"sync ...{left[max(0, start - 30) : start + 50]!r} / async ...{right[max(0, start - 30) : start + 50]!r}"


def differences() -> dict[str, str]:
    """Every difference between the twins today: what differs -> how."""
    found: dict[str, str] = {}
    for name in unpaired_protocols():
        found[f"{name}: no twin in chatmemory.aio.store"] = "a sync protocol without an asyncio one"
    for label, (sync, asynchronous) in pairs().items():
        found.update(_compare(label, sync, asynchronous))
        if not (inspect.isclass(sync) and inspect.isclass(asynchronous)):
            continue
        sync_members, async_members = members(sync), members(asynchronous)
        for sync_name, async_name in RENAMED.items():
            if sync_name in sync_members and async_name in async_members and sync_name not in async_members:
                async_members[sync_name] = async_members.pop(async_name)
        for name in sorted(set(sync_members) - set(async_members)):
            found[f"{label}.{name}: only in sync"] = f"{sync.__module__}.{sync.__qualname__} has it"
        for name in sorted(set(async_members) - set(sync_members)):
            found[f"{label}.{name}: only in asyncio"] = f"{asynchronous.__module__}.{asynchronous.__qualname__} has it"
        for name in sorted(set(sync_members) & set(async_members)):
            (sync_kind, sync_value), (async_kind, async_value) = sync_members[name], async_members[name]
            if sync_kind != async_kind:
                found[f"{label}.{name}: kind"] = f"sync {sync_kind} / async {async_kind}"
                continue
            found.update(_compare(f"{label}.{name}", sync_value, async_value))
    return found


def test_the_pairs_are_found() -> None:
    # A change in how pairs are found must not empty the comparison.
    found = pairs()
    for name in (
        "chatmemory.aio.stores.redis.RedisChatMemoryStore",
        "chatmemory.aio.stores.sql.SQLChatMemoryStore",
        "chatmemory.aio.stores.mongodb.MongoChatMemoryStore",
        "chatmemory.aio.stores.langchain4j_redis.LangChain4jRedisChatMemoryStore",
        "chatmemory.aio.stores.memory.InMemoryChatMemoryStore",
        "chatmemory.aio.MessageWindowChatMemory",
        "chatmemory.aio.TokenWindowChatMemory",
        "chatmemory.aio.SummarizingChatMemory",
        "chatmemory.aio.SupportsVersioning",
        "chatmemory.aio.store.SupportsRecordedWrites",
        "chatmemory.aio.open_store",
    ):
        assert name in found, name


def test_sync_and_asyncio_twins_match_but_for_the_known_differences() -> None:
    found = differences()
    new = {key: detail for key, detail in found.items() if key not in KNOWN_DIFFERENCES}
    gone = sorted(key for key in KNOWN_DIFFERENCES if key not in found)
    assert new == {}, "new differences between sync and asyncio twins (align them, or list them with a reason)"
    assert gone == [], "listed in KNOWN_DIFFERENCES but no longer different: remove them"


def test_the_asyncio_time_and_purge_protocols_fit_the_asyncio_stores() -> None:
    # Each asyncio store class that has the methods of SupportsMemoryTimes, SupportsExpiryAt or
    # SupportsExpiryPurge passes the protocol's isinstance check, with coroutine methods, as its sync twin
    # passes the sync protocol's; a store without them passes neither.
    protocols = {
        SupportsMemoryTimes: (sync_times.SupportsMemoryTimes, "memory_times"),
        SupportsExpiryAt: (sync_times.SupportsExpiryAt, "expire_at"),
        SupportsExpiryPurge: (sync_store.SupportsExpiryPurge, "purge_expired"),
    }
    found: dict[type, list[str]] = {protocol: [] for protocol in protocols}
    for label, (sync, asynchronous) in pairs().items():
        if not label.startswith("chatmemory.aio.stores.") or not inspect.isclass(asynchronous):
            continue
        for protocol, (sync_protocol, method) in protocols.items():
            assert issubclass(asynchronous, protocol) == issubclass(sync, sync_protocol), (label, method)
            if issubclass(asynchronous, protocol):
                assert inspect.iscoroutinefunction(getattr(asynchronous, method)), (label, method)
                found[protocol].append(label.rsplit(".", 2)[1])
    assert found == {
        SupportsMemoryTimes: ["memory", "mongodb", "redis", "sql"],
        SupportsExpiryAt: ["memory", "mongodb", "redis", "sql"],
        SupportsExpiryPurge: ["sql"],
    }

    async def check() -> None:
        store = InMemoryChatMemoryStore()
        assert isinstance(store, SupportsMemoryTimes) and isinstance(store, SupportsExpiryAt)
        assert not isinstance(store, SupportsExpiryPurge)
        await store.update_messages("a", [])
        times = await store.memory_times("a")
        assert times is not None and times.expires_at is None
        assert await store.memory_times("unknown") is None
        await store.aclose()

    asyncio.run(check())


if __name__ == "__main__":
    for key, detail in sorted(differences().items()):
        print(f"{key}\n    {detail}")

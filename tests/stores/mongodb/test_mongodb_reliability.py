"""Issue 10 for the MongoDB store: server-clock expiry and versions, any iterable, exactly-once writes
under a lost reply, bounded ttl, wrapped names, fast failure on a server that is down, use after close,
invalidation. Each test failed on the store before these fixes."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from pymongo import MongoClient, monitoring

from chatmemory import (
    MessageWindowChatMemory,
    StoreError,
    SystemMessage,
    UserMessage,
)
from chatmemory.stores.mongodb import MongoChatMemoryStore
from support.backends.mongodb import DATABASE, mongodb_url
from support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.mongodb

_real_time = time.time  # kept before any test skews the process's clock


def _users(*numbers: int) -> list[UserMessage]:
    return [UserMessage(str(number)) for number in numbers]


def _texts(messages: list[Any]) -> list[str]:
    return [message.text for message in messages]


@pytest.fixture(scope="module")
def url() -> str:
    return mongodb_url()


@pytest.fixture(scope="module")
def client(url: str) -> Iterator[MongoClient[Any]]:
    made: MongoClient[Any] = MongoClient(url, serverSelectionTimeoutMS=10_000)
    yield made
    made.close()


@pytest.fixture
def collection_name(client: MongoClient[Any]) -> Iterator[str]:
    name = f"memories_{uuid.uuid4().hex}"
    yield name
    client[DATABASE].drop_collection(name)


@pytest.fixture
def make_store(client: MongoClient[Any], collection_name: str) -> Any:
    def make(**options: Any) -> MongoChatMemoryStore:
        return MongoChatMemoryStore(client, database=DATABASE, collection=collection_name, **options)

    return make


# ------------------------------------------------------------------------ 2: the server's clock decides


_REAL_DATETIME = datetime.datetime


class _AnyDatetime(type):
    """The patched class still recognises the datetimes the driver decodes (instances of the real class)."""

    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, _REAL_DATETIME)


@pytest.fixture
def skew_client_clock(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make this process's wall clock run ``seconds`` ahead (negative: behind); the server's is untouched."""
    real_time_ns, real_time, real_now = time.time_ns, time.time, datetime.datetime.now

    def skew(seconds: float) -> None:
        offset = datetime.timedelta(seconds=seconds)

        class Clock(datetime.datetime, metaclass=_AnyDatetime):
            @classmethod
            def now(cls, tz: Any = None) -> Any:  # type: ignore[override]
                return real_now(tz) + offset

        monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + int(seconds * 1e9))
        monkeypatch.setattr(time, "time", lambda: real_time() + seconds)
        monkeypatch.setattr(datetime, "datetime", Clock)

    return skew


def test_a_host_whose_clock_runs_ahead_sees_a_live_memory_and_extends_it(
    make_store: Any, skew_client_clock: Any
) -> None:
    make_store(ttl=10).update_messages("chat", _users(1, 2))
    skew_client_clock(60)  # this host is a minute ahead: by its clock the memory expired 50 s ago
    ahead = make_store(ttl=10)
    assert ahead.get_messages("chat") == _users(1, 2)
    MessageWindowChatMemory("chat", store=ahead, max_messages=10).add(UserMessage("3"))
    assert ahead.get_messages("chat") == _users(1, 2, 3)  # extended, not replaced
    assert list(ahead.memory_ids()) == ["chat"]


def test_a_host_whose_clock_runs_behind_writes_an_expiry_by_the_servers_clock(
    make_store: Any, client: MongoClient[Any], collection_name: str, skew_client_clock: Any
) -> None:
    skew_client_clock(-60)  # a minute behind: a client-side expiry would be 50 s in the past
    behind = make_store(ttl=10)
    before = _real_time()
    behind.update_messages("chat", _users(1))
    after = _real_time()
    assert behind.get_messages("chat") == _users(1)
    document = client[DATABASE][collection_name].find_one({"_id": "chat"})
    assert document is not None
    expires_at = document["expires_at"].replace(tzinfo=datetime.timezone.utc).timestamp()
    assert before + 9 <= expires_at <= after + 11


def test_turns_of_a_host_whose_clock_runs_behind_keep_the_servers_expiry(
    make_store: Any, client: MongoClient[Any], collection_name: str, skew_client_clock: Any
) -> None:
    skew_client_clock(-60)
    behind = make_store(ttl=10)
    memory = MessageWindowChatMemory("chat", store=behind, max_messages=3)
    for number in range(6):  # the first write teaches the store the server's clock; the rest are diffs
        memory.add(UserMessage(str(number)))
        before_check = _real_time()
        assert memory.messages() == _users(*range(max(0, number - 2), number + 1))
        document = client[DATABASE][collection_name].find_one({"_id": "chat"})
        assert document is not None
        expires_at = document["expires_at"].replace(tzinfo=datetime.timezone.utc).timestamp()
        assert before_check + 8 <= expires_at <= _real_time() + 11


def test_versions_keep_growing_across_delete_and_recreate_under_clock_skew(
    make_store: Any, skew_client_clock: Any
) -> None:
    on_time = make_store()
    first = on_time.save("chat", _users(1), 0)
    on_time.update_messages("chat", _users(2))
    seen = [first, on_time.load("chat").version]
    skew_client_clock(-60)
    behind = make_store()
    behind.delete_messages("chat")
    seen.append(behind.save("chat", _users(3), 0))
    behind.delete_messages("chat")
    behind.update_messages("chat", _users(4))
    seen.append(behind.load("chat").version)
    assert seen == sorted(seen)
    assert len(set(seen)) == len(seen)


# --------------------------------------------------------------------------- 3: any iterable, once


def test_update_messages_and_save_accept_a_generator(make_store: Any) -> None:
    store: MongoChatMemoryStore = make_store()
    store.update_messages("m", (message for message in _users(1, 2)))
    assert store.get_messages("m") == _users(1, 2)
    version = store.load("m").version
    store.save("m", iter(_users(1, 2, 3)), version)
    assert store.get_messages("m") == _users(1, 2, 3)
    store.save("n", (message for message in [SystemMessage("s"), UserMessage("a")]), 0)
    assert store.get_messages("n") == [SystemMessage("s"), UserMessage("a")]


# ------------------------------------------------------------------ 4: exactly once under a lost reply


class _LoseWriteReply(monitoring.CommandListener):
    """Cuts the connection instead of forwarding the reply to the next write command, then runs ``then``
    (another writer getting in) before the store can resend."""

    def __init__(self) -> None:
        self.proxy: TcpProxy | None = None
        self.armed = False
        self.then: Any = None
        self.cut = 0

    def arm(self, then: Any = None) -> None:
        self.armed, self.then = True, then

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if self.armed and event.command_name in {"findAndModify", "update"}:
            assert self.proxy is not None
            self.armed = False
            # The command goes through; its answer does not come back. Only this command's: the key that
            # opens its body (BSON string element) marks its connection, not the monitor's.
            self.proxy.cut_reply_to(b"\x02" + event.command_name.encode() + b"\x00")

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        if event.command_name in {"findAndModify", "update"}:
            self.cut += 1
            if self.then is not None:
                then, self.then = self.then, None
                then()


@pytest.fixture
def proxied(url: str, collection_name: str) -> Iterator[tuple[_LoseWriteReply, Any]]:
    """A store whose connections go through a fault proxy; retryable writes off, as on a standalone mongod."""
    parsed = urlsplit(url)
    listener = _LoseWriteReply()
    with TcpProxy(parsed.hostname or "127.0.0.1", parsed.port or 27017) as proxy:
        listener.proxy = proxy
        proxied_client: MongoClient[Any] = MongoClient(
            f"mongodb://{proxy.host}:{proxy.port}/?directConnection=true",
            retryWrites=False,
            serverSelectionTimeoutMS=5_000,
            heartbeatFrequencyMS=60_000,  # no monitoring traffic in the proxy's way:
            serverMonitoringMode="poll",  # no streamed hello replies or RTT pings either
            event_listeners=[listener],
        )

        def make(**options: Any) -> MongoChatMemoryStore:
            return MongoChatMemoryStore(proxied_client, database=DATABASE, collection=collection_name, **options)

        yield listener, make
        proxied_client.close()


def test_an_add_whose_reply_is_lost_is_applied_once(proxied: Any, make_store: Any) -> None:
    lose, make = proxied
    memory = MessageWindowChatMemory("chat", store=make(), max_messages=10)
    memory.add(UserMessage("start"))
    lose.arm()
    memory.add(UserMessage("from A"))  # no error: the resend finds its write id
    assert lose.cut == 1
    assert _texts(make_store().get_messages("chat")) == ["start", "from A"]


def test_a_lost_reply_and_another_writer_before_the_resend_double_nothing(proxied: Any, make_store: Any) -> None:
    lose, make = proxied
    other = MessageWindowChatMemory("chat", store=make_store(), max_messages=10)
    other.add(UserMessage("start"))
    memory = MessageWindowChatMemory("chat", store=make(), max_messages=10)
    lose.arm(then=lambda: other.add(UserMessage("from B")))
    memory.add(UserMessage("from A"))
    assert lose.cut == 1
    assert _texts(other.messages()) == ["start", "from A", "from B"]


def test_an_update_resent_after_a_lost_reply_does_not_undo_a_later_write(proxied: Any, make_store: Any) -> None:
    lose, make = proxied
    other: MongoChatMemoryStore = make_store()
    other.update_messages("chat", _users(0))
    store = make()
    assert store.get_messages("chat") == _users(0)
    lose.arm(then=lambda: other.update_messages("chat", _users(2)))
    store.update_messages("chat", _users(1))
    assert lose.cut == 1
    assert other.get_messages("chat") == _users(2)


def test_a_create_whose_reply_is_lost_is_reported_as_written(proxied: Any, make_store: Any) -> None:
    lose, make = proxied
    store = make()
    assert store.get_messages("chat") == []  # connections made, monitors settled
    lose.arm()
    version = store.save("chat", _users(1), 0)
    assert lose.cut == 1
    assert make_store().load("chat").version == version


# ------------------------------------------------------- 7: arguments and failures at construction


@pytest.mark.parametrize("ttl", [1e12, datetime.timedelta.max, float("inf")])
def test_a_ttl_past_the_bound_is_refused_at_construction(client: MongoClient[Any], ttl: Any) -> None:
    with pytest.raises(ValueError, match="ttl"):
        MongoChatMemoryStore(client, ttl=ttl)


def test_the_longest_ttl_accepted_writes_and_reads(make_store: Any) -> None:
    from chatmemory.stores.base import MAX_TTL_SECONDS

    store: MongoChatMemoryStore = make_store(ttl=MAX_TTL_SECONDS)
    store.update_messages("chat", _users(1))
    store.save("chat", _users(1, 2), store.load("chat").version)
    assert store.get_messages("chat") == _users(1, 2)


@pytest.mark.parametrize(
    ("database", "collection", "kind"),
    [("bad.name", "memories", "database"), ("", "memories", "database"), ("db", "", "collection"),
     ("db", "bad$name", "collection"), ("with space", "memories", "database")],
)  # fmt: skip
def test_bad_names_are_refused_at_construction_saying_what_to_use(
    client: MongoClient[Any], database: str, collection: str, kind: str
) -> None:
    with pytest.raises(ValueError, match=f"{kind} name") as raised:
        MongoChatMemoryStore(client, database=database, collection=collection)
    assert "e.g." in str(raised.value)


def test_a_server_that_is_down_fails_fast_without_a_topology_dump() -> None:
    # Nothing listens on port 9 of loopback; no timeout in the URL: the store's defaults apply.
    store = MongoChatMemoryStore("mongodb://127.0.0.1:9/", snapshot_cache_size=0)
    started = time.monotonic()
    with pytest.raises(StoreError) as raised:
        store.get_messages("chat")
    elapsed = time.monotonic() - started
    store.close()
    assert elapsed < 15, f"took {elapsed:.1f}s"
    assert "Topology Description" not in str(raised.value)
    assert "server" in str(raised.value)


def test_the_default_timeouts_can_be_overridden(url: str) -> None:
    store = MongoChatMemoryStore("mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=100")
    assert store._client.options.server_selection_timeout == 0.1
    store.close()
    store = MongoChatMemoryStore("mongodb://127.0.0.1:9/", client_options={"serverSelectionTimeoutMS": 250})
    assert store._client.options.server_selection_timeout == 0.25
    assert store._client.options.pool_options.connect_timeout == 5.0
    store.close()


def test_use_after_close_is_a_store_error(url: str, collection_name: str) -> None:
    store = MongoChatMemoryStore(url, database=DATABASE, collection=collection_name)
    store.update_messages("chat", _users(1))
    store.close()
    for operation in (
        lambda: store.get_messages("chat"),
        lambda: store.save("chat", _users(1), 0),
        lambda: store.update_messages("chat", _users(1)),
        lambda: store.delete_messages("chat"),
        lambda: store.read_raw("chat"),
        lambda: list(store.memory_ids()),
    ):
        with pytest.raises(StoreError, match="closed"):
            operation()


def test_invalidate_drops_a_cached_snapshot_after_a_hand_repair(
    make_store: Any, client: MongoClient[Any], collection_name: str
) -> None:
    store: MongoChatMemoryStore = make_store()
    store.update_messages("chat", _users(1, 2))
    snapshot = store.load("chat")
    # An operator rewrites the array by hand, leaving the version and the incarnation as they were: the
    # cached snapshot no longer describes the document, and only the operator knows it.
    repaired = store.read_raw("chat")[:1]
    client[DATABASE][collection_name].update_one(
        {"_id": "chat"}, {"$set": {"messages": [r.decode() for r in repaired]}}
    )
    store.invalidate("chat")
    store.save("chat", [*snapshot.messages, UserMessage("3")], snapshot.version)
    assert store.get_messages("chat") == _users(1, 2, 3)
    store.load("chat")
    client[DATABASE][collection_name].update_one(
        {"_id": "chat"}, {"$set": {"messages": [r.decode() for r in repaired]}}
    )
    store.invalidate_all()
    store.save("chat", [*_users(1, 2, 3), UserMessage("4")], store.load("chat").version)
    assert store.get_messages("chat") == _users(1, 2, 3, 4)

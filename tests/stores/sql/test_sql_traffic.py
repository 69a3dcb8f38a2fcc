"""What the SQL store sends: a steady-state turn costs the same for a window of 20 and of 200."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import event, select, text

from chatmemory import ChatMessage, SystemMessage, UserMessage
from chatmemory.stores.sql import SQLChatMemoryStore
from chatmemory.stores.sql.engine import in_transaction
from support.backends.sqlite import SQLBackend, counted_rollbacks


@pytest.fixture
def store(sql_backend: SQLBackend) -> Iterator[SQLChatMemoryStore]:
    made = sql_backend.make_store()
    yield made
    sql_backend.close_store(made)


@dataclass
class Traffic:
    """Statements sent, and rows the driver reports changed by INSERT/UPDATE/DELETE statements."""

    statements: list[str] = field(default_factory=list)
    changed_rows: int = 0


@dataclass
class Recorder:
    store: SQLChatMemoryStore
    current: Traffic | None = None

    def __post_init__(self) -> None:
        event.listen(self.store.engine, "before_cursor_execute", self._before)
        event.listen(self.store.engine, "after_cursor_execute", self._after)

    def _before(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if self.current is not None:
            self.current.statements.append(statement)

    def _after(self, _conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        verb = statement.lstrip().split(None, 1)[0].upper()
        changes = verb in ("INSERT", "UPDATE", "DELETE") or statement.startswith("BEGIN NOT ATOMIC")  # MariaDB's turn
        if self.current is not None and changes and cursor.rowcount > 0:
            self.current.changed_rows += cursor.rowcount

    def record(self) -> Traffic:
        self.current = Traffic()
        return self.current

    def stop(self) -> None:
        self.current = None
        event.remove(self.store.engine, "before_cursor_execute", self._before)
        event.remove(self.store.engine, "after_cursor_execute", self._after)


def _is_mariadb(store: SQLChatMemoryStore) -> bool:
    """Whether the store's server is MariaDB (a diffed turn is then one compound statement)."""
    return bool(getattr(store.engine.dialect, "is_mariadb", False))


def _row_versions(store: SQLChatMemoryStore, memory_id: str) -> set[tuple[Any, ...]]:
    """The message rows of a memory as the database identifies them: seq, plus the row version on PostgreSQL.

    A row deleted and inserted again, or updated in place, shows up as changed on PostgreSQL (``xmin`` is
    the id of the transaction that wrote the row version).
    """
    messages = store._tables.messages
    with store.engine.connect() as connection:
        if store.engine.dialect.name == "postgresql":
            rows = connection.execute(
                text(f"SELECT seq, xmin::text FROM {messages.name} WHERE memory_id = :id"),
                {"id": memory_id.encode()},
            )
        else:
            rows = connection.execute(select(messages.c.seq).where(messages.c.memory_id == memory_id))
        return {tuple(row) for row in rows}


def _turn_cost(
    store: SQLChatMemoryStore, window: int, turns: int = 5, *, whole_window: bool = False
) -> list[tuple[int, int, int]]:
    """For each steady-state turn: (statements, rows the driver changed, message rows that changed).

    A turn is ``save`` at the previous version, or (``whole_window``) ``update_messages`` of the whole
    window, as integrations using the plain store contract write.
    """
    memory_id = f"traffic-{window}-{whole_window}"
    messages: list[ChatMessage] = [UserMessage(f"m{i}") for i in range(window)]
    version = store.save(memory_id, messages, 0)
    recorder = Recorder(store)
    costs = []
    try:
        for turn in range(turns + 2):
            messages = [*messages[1:], UserMessage(f"turn {turn}")]
            before = _row_versions(store, memory_id)
            traffic = recorder.record()
            if whole_window:
                store.update_messages(memory_id, messages)
            else:
                version = store.save(memory_id, messages, version)
            recorder.current = None
            after = _row_versions(store, memory_id)
            if turn >= 2:  # the first turns may fill the snapshot cache
                costs.append((len(traffic.statements), traffic.changed_rows, len(before ^ after)))
    finally:
        recorder.stop()
    assert store.get_messages(memory_id) == messages
    return costs


def test_steady_state_turn_cost_does_not_depend_on_the_window(store: SQLChatMemoryStore) -> None:
    small = _turn_cost(store, 20)
    large = _turn_cost(store, 200)
    assert small == large, (small, large)
    statements, changed, rows = small[0]
    # One message row deleted and one inserted; the head row is the only other row written.
    assert rows == 2
    if store.engine.dialect.name == "postgresql":
        assert statements == 1  # one statement with data-modifying CTEs
    else:
        assert changed == 3  # head UPDATE + DELETE + INSERT, each of one row
        assert statements <= 5  # BEGIN IMMEDIATE/COMMIT on SQLite count as statements


def test_update_messages_of_the_whole_window_costs_a_diffed_turn(store: SQLChatMemoryStore) -> None:
    # The store diffs the window against its cached snapshot and conditions the write on that version.
    small = _turn_cost(store, 20, whole_window=True)
    large = _turn_cost(store, 200, whole_window=True)
    assert small == large, (small, large)
    statements, changed, rows = small[0]
    assert rows == 2
    if store.engine.dialect.name == "postgresql":
        assert statements == 1
    elif _is_mariadb(store):
        assert changed == 3 and statements == 1  # one compound statement: head UPDATE, DELETE, INSERT, COMMIT
    else:
        assert changed == 3 and statements == 5  # BEGIN, head UPDATE, DELETE, INSERT, COMMIT


def test_update_messages_after_another_writer_falls_back_to_the_locked_write(
    sql_backend: SQLBackend, store: SQLChatMemoryStore
) -> None:
    other = SQLChatMemoryStore(sql_backend.url, table_prefix=store.table_prefix)
    try:
        messages: list[ChatMessage] = [UserMessage(f"m{i}") for i in range(5)]
        store.update_messages("fallback", messages)
        other.update_messages("fallback", [*messages, UserMessage("other")])
        store.update_messages("fallback", [*messages[1:], UserMessage("mine")])  # stale snapshot: no lost write
        assert other.get_messages("fallback") == [*messages[1:], UserMessage("mine")]
    finally:
        other.close()


@pytest.mark.parametrize("window", [20, 200])
def test_a_write_the_store_has_not_cached_changes_only_the_rows_that_differ(
    sql_backend: SQLBackend, window: int
) -> None:
    # No snapshot cache: every write goes under the lock, and reads the stored window there to diff it.
    store = sql_backend.make_store(snapshot_cache_size=0)
    try:
        messages: list[ChatMessage] = [UserMessage(f"m{i}") for i in range(window)]
        store.update_messages("cold", messages)
        before = _row_versions(store, "cold")
        messages = [*messages[1:], UserMessage("new")]
        store.update_messages("cold", messages)
        after = _row_versions(store, "cold")
        assert len(before ^ after) == 2  # the evicted row and the appended one; the rest stay as written
        assert store.get_messages("cold") == messages
    finally:
        sql_backend.close_store(store)


def test_a_new_system_message_first_rewrites_the_window(store: SQLChatMemoryStore) -> None:
    # The test above could fail: a turn that is not "old minus some plus new" touches every row.
    messages: list[ChatMessage] = [UserMessage(f"m{i}") for i in range(50)]
    version = store.save("rewrite", messages, 0)
    before = _row_versions(store, "rewrite")
    messages = [SystemMessage("be brief"), *messages[1:]]
    store.save("rewrite", messages, version)
    after = _row_versions(store, "rewrite")
    assert len(before ^ after) == 100
    assert store.get_messages("rewrite") == messages


def test_a_read_is_one_query_and_one_more_for_an_absent_memory(store: SQLChatMemoryStore) -> None:
    store.update_messages("read", [UserMessage(f"m{i}") for i in range(30)])
    fresh = SQLChatMemoryStore(store.engine, table_prefix=store.table_prefix)
    recorder = Recorder(fresh)
    try:
        fresh.get_messages("read")  # the first operation also checks the schema revision
        present = recorder.record()
        snapshot = fresh.load("read")
        absent = recorder.record()
        unknown = fresh.load("nobody")
    finally:
        recorder.stop()
    assert len(snapshot.messages) == 30 and snapshot.version > 0
    assert unknown.version == 0
    assert len(present.statements) == 1
    # No head row: the stray read tells an absent memory from message rows left without their head.
    assert len(absent.statements) == 2 and "EXISTS" in absent.statements[1]


@pytest.mark.parametrize(("evicted", "appended"), [(0, 0), (0, 1), (1, 0), (2, 3), (8, 8), (9, 1), (1, 9), (12, 12)])
def test_a_diffed_turn_of_any_shape_writes_exactly_its_rows(
    store: SQLChatMemoryStore, evicted: int, appended: int
) -> None:
    # PostgreSQL runs small turns with a parameter per row and larger ones with arrays: both must hold.
    memory_id = f"shape-{evicted}-{appended}"
    messages: list[ChatMessage] = [UserMessage(f"m{i}") for i in range(20)]
    version = store.save(memory_id, messages, 0)
    for turn in range(2):
        messages = [*messages[evicted:], *(UserMessage(f"turn {turn} new {i}") for i in range(appended))]
        before = _row_versions(store, memory_id)
        version = store.save(memory_id, messages, version)
        after = _row_versions(store, memory_id)
        # Only the evicted rows went and only the appended rows came (the head row is not counted here).
        assert len(before - after) == evicted and len(after - before) == appended
        assert store.get_messages(memory_id) == messages
        assert store.load(memory_id).version == version


@pytest.mark.parametrize("dropped", [(0, 2), (1, 5, 6), (0, 1, 2, 7)])
def test_a_diffed_turn_dropping_scattered_messages_deletes_exactly_those_rows(
    store: SQLChatMemoryStore, dropped: tuple[int, ...]
) -> None:
    # Consecutive rows go as one range, scattered ones by number: the rows between must stay.
    memory_id = f"scattered-{'-'.join(map(str, dropped))}"
    messages: list[ChatMessage] = [UserMessage(f"m{i}") for i in range(10)]
    version = store.save(memory_id, messages, 0)
    messages = [message for index, message in enumerate(messages) if index not in dropped]
    messages.append(UserMessage("new"))
    before = _row_versions(store, memory_id)
    version = store.save(memory_id, messages, version)
    after = _row_versions(store, memory_id)
    assert len(before - after) == len(dropped) and len(after - before) == 1
    assert store.get_messages(memory_id) == messages
    fresh = SQLChatMemoryStore(store.engine, table_prefix=store.table_prefix)
    assert fresh.get_messages(memory_id) == messages


def _modify_cost(store: SQLChatMemoryStore, window: int) -> tuple[list[str], int]:
    """A steady-state locked update (drop the oldest, append one): the statements it sent, the rows that changed."""
    memory_id = f"locked-{window}"
    store.update_messages(memory_id, [UserMessage(f"m{i}") for i in range(window)])
    store.modify(memory_id, lambda messages: [*messages[1:], UserMessage("warm")])
    recorder = Recorder(store)
    try:
        before = _row_versions(store, memory_id)
        traffic = recorder.record()
        store.modify(memory_id, lambda messages: [*messages[1:], UserMessage("new")])
        recorder.current = None
        after = _row_versions(store, memory_id)
    finally:
        recorder.stop()
    expected = [*(UserMessage(f"m{i}") for i in range(2, window)), UserMessage("warm"), UserMessage("new")]
    assert store.get_messages(memory_id) == expected
    return traffic.statements, len(before ^ after)


def test_a_locked_update_the_cache_describes_reads_no_window(store: SQLChatMemoryStore) -> None:
    # Under the head row's lock, a head at the cached version and incarnation is the cached window:
    # the update sends the lock, the diffed turn's statements and the COMMIT, whatever the window's length.
    small, small_rows = _modify_cost(store, 20)
    large, large_rows = _modify_cost(store, 200)
    assert small == large
    assert small_rows == large_rows == 2  # the evicted row and the appended one
    assert not any("UNION ALL" in statement for statement in small), small  # no window read
    assert any("FOR UPDATE" in statement for statement in small) or store.engine.dialect.name == "sqlite"
    if store.engine.dialect.name == "postgresql":
        assert len(small) == 4  # BEGIN, the lock, the one-statement turn, COMMIT


def test_a_locked_update_on_mysql_writes_its_turn_as_one_string(sql_backend: SQLBackend) -> None:
    # No cursor events (they would send it statement by statement): the driver's own query calls are watched.
    if sql_backend.name != "mysql":
        pytest.skip("only MySQL/MariaDB turns go as one string")
    store = sql_backend.make_store()
    sent: list[str] = []

    def watch(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if getattr(dbapi_connection, "_watched", False):
            return
        dbapi_connection._watched = True
        query = dbapi_connection.query

        def recorded(sql: Any, unbuffered: bool = False) -> Any:
            sent.append(str(sql))
            return query(sql, unbuffered)

        dbapi_connection.query = recorded

    event.listen(store.engine, "checkout", watch)
    try:
        store.update_messages("joined-lock", [UserMessage(f"m{i}") for i in range(5)])
        store.modify("joined-lock", lambda messages: [*messages[1:], UserMessage("warm")])
        sent.clear()
        store.modify("joined-lock", lambda messages: [*messages[1:], UserMessage("new")])
        verbs = [sql.lstrip().split(None, 1)[0].upper() for sql in sent]
        assert verbs == ["BEGIN", "SELECT", "UPDATE", "COMMIT"], sent
        assert "FOR UPDATE" in sent[1] and "INSERT INTO" in sent[2] and "DELETE" in sent[2]
        expected = [UserMessage(f"m{i}") for i in range(2, 5)] + [UserMessage("warm"), UserMessage("new")]
        fresh = SQLChatMemoryStore(sql_backend.url, table_prefix=store.table_prefix)
        try:
            assert fresh.get_messages("joined-lock") == expected
        finally:
            fresh.close()
    finally:
        event.remove(store.engine, "checkout", watch)
        sql_backend.close_store(store)


def test_a_locked_update_after_another_writer_reads_the_window_under_the_lock(
    sql_backend: SQLBackend, store: SQLChatMemoryStore
) -> None:
    # The cached snapshot is another version than the locked head's: the update reads what is stored.
    other = SQLChatMemoryStore(sql_backend.url, table_prefix=store.table_prefix)
    recorder = Recorder(store)
    try:
        store.update_messages("stale", [UserMessage("a")])
        store.load("stale")
        other.modify("stale", lambda messages: [*messages, UserMessage("other")])
        traffic = recorder.record()
        seen: list[list[ChatMessage]] = []
        store.modify("stale", lambda messages: seen.append(list(messages)) or [*messages, UserMessage("mine")])
        recorder.current = None
        assert seen == [[UserMessage("a"), UserMessage("other")]]
        assert any("UNION ALL" in statement for statement in traffic.statements)
        expected = [UserMessage("a"), UserMessage("other"), UserMessage("mine")]
        assert store.get_messages("stale") == other.get_messages("stale") == expected
        # Its cache now holds its own write: the next update reads nothing again.
        traffic = recorder.record()
        store.modify("stale", lambda messages: [*messages, UserMessage("again")])
        assert not any("UNION ALL" in statement for statement in traffic.statements)
        assert other.get_messages("stale") == [*expected, UserMessage("again")]
    finally:
        recorder.stop()
        other.close()


def test_a_locked_update_after_the_memory_expired_starts_from_nothing(
    sql_backend: SQLBackend, store: SQLChatMemoryStore
) -> None:
    # Expired by another store object: this one's cache still holds the window; the locked head says it is gone.
    other = SQLChatMemoryStore(sql_backend.url, table_prefix=store.table_prefix)
    try:
        store.update_messages("expired", [UserMessage("old")])
        store.load("expired")
        other.expire_at("expired", datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc))
        seen: list[list[ChatMessage]] = []
        store.modify("expired", lambda messages: seen.append(list(messages)) or [*messages, UserMessage("new")])
        assert seen == [[]]
        assert store.get_messages("expired") == other.get_messages("expired") == [UserMessage("new")]
    finally:
        other.close()


# ------------------------------------------------------------------------------------------ with history


@pytest.fixture
def history_store(sql_backend: SQLBackend) -> Iterator[SQLChatMemoryStore]:
    made = sql_backend.make_store(history=True)
    yield made
    sql_backend.close_store(made)


def test_a_steady_state_turn_with_history_deletes_nothing(history_store: SQLChatMemoryStore) -> None:
    small = _turn_cost(history_store, 20)
    large = _turn_cost(history_store, 200)
    assert small == large, (small, large)
    statements, changed, rows = small[0]
    # The evicted row stays (it is history), outside the window's ranges: one row inserted, none deleted.
    assert rows == 1
    if history_store.engine.dialect.name == "postgresql":
        assert statements == 1
    elif _is_mariadb(history_store):
        assert changed == 2 and statements == 1  # one compound statement: head UPDATE, INSERT, COMMIT
    else:
        assert changed == 2 and statements == 4  # BEGIN, head UPDATE, INSERT, COMMIT


def test_a_turn_after_a_kept_system_message_with_history_deletes_and_marks_nothing(
    history_store: SQLChatMemoryStore,
) -> None:
    system = SystemMessage("be brief")
    messages: list[ChatMessage] = [system, *(UserMessage(f"m{i}") for i in range(20))]
    version = history_store.save("pinned", messages, 0)
    for turn in range(5):
        messages = [system, *messages[2:], UserMessage(f"turn {turn}")]
        before = _row_versions(history_store, "pinned")
        version = history_store.save("pinned", messages, version)
        after = _row_versions(history_store, "pinned")
        assert len(after - before) == 1 and before <= after  # one row added, none changed
    fresh = SQLChatMemoryStore(history_store.engine, table_prefix=history_store.table_prefix)
    assert fresh.get_messages("pinned") == history_store.get_messages("pinned") == messages


@pytest.mark.parametrize(("evicted", "appended"), [(0, 1), (2, 3), (9, 1), (12, 12)])
def test_a_diffed_turn_with_history_only_adds_rows(
    history_store: SQLChatMemoryStore, evicted: int, appended: int
) -> None:
    memory_id = f"shape-{evicted}-{appended}"
    messages: list[ChatMessage] = [UserMessage(f"m{i}") for i in range(20)]
    version = history_store.save(memory_id, messages, 0)
    for turn in range(2):
        messages = [*messages[evicted:], *(UserMessage(f"turn {turn} new {i}") for i in range(appended))]
        before = _row_versions(history_store, memory_id)
        version = history_store.save(memory_id, messages, version)
        after = _row_versions(history_store, memory_id)
        assert before <= after and len(after - before) == appended
        assert history_store.get_messages(memory_id) == messages


def test_an_eviction_from_the_middle_with_history_marks_rows_in_one_statement(
    history_store: SQLChatMemoryStore,
) -> None:
    messages: list[ChatMessage] = [UserMessage(f"m{i}") for i in range(10)]
    version = history_store.save("middle", messages, 0)
    recorder = Recorder(history_store)
    try:
        traffic = recorder.record()
        messages = [messages[0], messages[2], *messages[4:8], messages[9], UserMessage("new")]
        history_store.save("middle", messages, version)
    finally:
        recorder.stop()
    marks = [statement for statement in traffic.statements if "evicted" in statement and "UPDATE" in statement]
    if history_store.engine.dialect.name == "postgresql":
        assert len(traffic.statements) == 1 and "evicted" in traffic.statements[0]
    else:
        assert len(marks) == 1
    fresh = SQLChatMemoryStore(history_store.engine, table_prefix=history_store.table_prefix)
    assert fresh.get_messages("middle") == messages


def _rows_read_by_the_window_read(store: SQLChatMemoryStore, memory_id: str) -> int:
    """How many message rows the server reads to answer one window read (from its own counters or plan)."""
    parameters = {"p_id": memory_id, "p_known_incarnation": -1, "p_known_next": 0}
    dialect = store.engine.dialect.name
    with store.engine.connect() as connection:
        if dialect == "postgresql":
            connection.exec_driver_sql("SET enable_seqscan = off")  # tiny test tables: read as a large one is
            connection.exec_driver_sql(f"ANALYZE {store._tables.messages.name}")  # as autovacuum does
            compiled = str(store._statements.read.compile(dialect=store.engine.dialect))
            bound = {**parameters, "p_id": memory_id.encode()}
            (plan,) = connection.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + compiled, bound).scalar_one()

            def read(node: dict[str, Any]) -> int:
                own = 0
                if node.get("Relation Name") == store._tables.messages.name:
                    own = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
                    own += node.get("Rows Removed by Index Recheck", 0)
                return own + sum(read(child) for child in node.get("Plans", []))

            return read(plan["Plan"])
        if dialect == "sqlite":
            read = store._statements.fast_read
            steps = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + read.sql, read.bind(parameters)).all()
            searches = [step[3] for step in steps if store._tables.messages.name in step[3]]
            # The window's rows from the head's ranges on.
            assert any("seq>?" in step for step in searches), searches
            assert all("seq>?" in step for step in searches), searches
            return 0
        connection.exec_driver_sql(f"ANALYZE TABLE {store._tables.messages.name}")
        connection.exec_driver_sql("FLUSH STATUS")
        connection.execute(store._statements.read, parameters).all()
        status = dict(connection.execute(text("SHOW SESSION STATUS LIKE 'Handler_read_next'")).all())
        return int(status["Handler_read_next"])


@pytest.mark.parametrize("system", [False, True], ids=["plain", "system message kept"])
def test_a_window_read_with_history_reads_only_the_window(history_store: SQLChatMemoryStore, system: bool) -> None:
    head: list[ChatMessage] = [SystemMessage("be brief")] if system else []
    messages: list[ChatMessage] = [*head, *(UserMessage(f"m{i}") for i in range(10))]
    version = history_store.save("long", messages, 0)
    for turn in range(300):
        messages = [*head, *messages[len(head) + 1 :], UserMessage(f"turn {turn}")]
        version = history_store.save("long", messages, version)
    assert history_store.get_messages("long") == messages
    assert _rows_read_by_the_window_read(history_store, "long") <= len(messages) + 1  # not the 300 evicted rows


_COUNTERS = "SHOW SESSION STATUS WHERE Variable_name IN ('Com_select', 'Com_rollback')"


def _counters_of(dbapi_connection: Any) -> dict[str, int]:
    """The server's counters of one connection's session."""
    cursor = dbapi_connection.cursor()
    cursor.execute(_COUNTERS)
    counters = {name: int(value) for name, value in cursor.fetchall()}
    cursor.close()
    return counters


def _session_counters(store: SQLChatMemoryStore) -> dict[str, int]:
    """The counters of the connection the store's calls use: the one it keeps between them."""
    driver = store._executor
    connection = driver.checkout()
    try:
        return _counters_of(connection.dbapi_connection)
    finally:
        assert driver.keep(connection)  # kept again for the store's next call


def test_mariadb_connections_go_back_to_the_pool_without_rollback_unless_a_transaction_is_open(
    store: SQLChatMemoryStore,
) -> None:
    if store.engine.dialect.name not in ("mysql", "mariadb"):
        pytest.skip("PyMySQL sends ROLLBACK on every rollback(); the other drivers skip it themselves")
    store.update_messages("m", [UserMessage(f"m{index}") for index in range(5)])
    version = store.load("m").version
    before = _session_counters(store)
    for _ in range(20):
        store.get_messages("m")
    after = _session_counters(store)
    assert after["Com_select"] - before["Com_select"] == 20  # the same connection served every read
    assert after["Com_rollback"] == before["Com_rollback"]  # and was kept for the next without a round trip

    # A connection handed back inside a transaction is still rolled back before anyone reuses it.
    connection = store.engine.raw_connection()
    handed_back = connection.dbapi_connection
    rollbacks = _counters_of(handed_back)["Com_rollback"]
    cursor = connection.cursor()
    cursor.execute("BEGIN")
    cursor.execute(f"UPDATE {store._tables.memories.name} SET version = version + 100")
    cursor.close()
    connection.close()
    assert _counters_of(handed_back)["Com_rollback"] == rollbacks + 1  # idle in the pool, rolled back
    assert store.load("m").version == version  # the update was rolled back, not left open nor committed


def test_a_connection_handed_back_inside_a_transaction_is_rolled_back_before_anyone_reuses_it(
    store: SQLChatMemoryStore,
) -> None:
    store.update_messages("m", [UserMessage("a"), UserMessage("b")])
    version = store.load("m").version
    kept = store.engine.pool.checkedout()  # type: ignore[attr-defined]  # the one the store keeps for its next call
    connection = store.engine.raw_connection()
    cursor = connection.cursor()
    cursor.execute("BEGIN")
    cursor.execute(f"UPDATE {store._tables.memories.name} SET version = version + 100")
    cursor.close()
    handed_back = connection.dbapi_connection
    assert in_transaction(handed_back)
    connection.close()
    assert store.engine.pool.checkedout() == kept  # type: ignore[attr-defined]
    assert not in_transaction(handed_back)  # back in the pool, its transaction ended
    assert store.load("m").version == version  # rolled back: neither left open nor committed
    store.update_messages("m", [UserMessage("b"), UserMessage("c")])  # and no lock is left behind


def test_sqlite_connections_go_back_to_the_pool_without_a_rollback_call_unless_a_transaction_is_open(
    sql_backend: SQLBackend,
) -> None:
    if not sql_backend.url.startswith("sqlite"):
        pytest.skip("the driver's rollback() calls are counted on sqlite3's own connection class")
    counted = counted_rollbacks()
    store = sql_backend.make_store(engine_options={"connect_args": {"factory": counted}})
    try:
        # The first write checks the schema and takes the locked path, each on a SQLAlchemy Connection,
        # whose close calls rollback() (a no-op in sqlite3 with nothing open); the turns after it do not.
        store.update_messages("m", [UserMessage("a")])
        counted.rollbacks = 0
        for turn in range(10):
            store.update_messages("m", [UserMessage("a"), UserMessage(f"b{turn}")])
            store.get_messages("m")
        assert counted.rollbacks == 0  # every operation ended its transaction: nothing left to roll back
        connection = store.engine.raw_connection()
        connection.cursor().execute("BEGIN")
        connection.close()
        assert counted.rollbacks == 1  # one handed back inside a transaction is rolled back
    finally:
        sql_backend.close_store(store)

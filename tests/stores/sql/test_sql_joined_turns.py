"""A MySQL/MariaDB turn as one multi-statement string: one round trip and a ``COMMIT`` instead of five.

The statements are counted where PyMySQL sends them (``Connection.query``, one call per round trip), so
the store's path is the one it takes with no cursor events listened to.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, event

from chatmemory import AiMessage, ChatMessage, UserMessage
from chatmemory.stores.sql import SQLChatMemoryStore
from chatmemory.stores.sql.diffed_writes import JOINED_PAYLOAD_LIMIT, SCALAR_DIFF_LIMIT
from chatmemory.stores.sql.rendered import Joined, render
from chatmemory.stores.sql.schema import build_tables
from chatmemory.stores.sql.statements import Statements
from support.backends.mysql import open_backend
from support.backends.sqlite import SQLBackend

pytestmark = pytest.mark.mysql


@pytest.fixture(scope="module")
def mysql() -> Iterator[SQLBackend]:
    backend = open_backend()
    yield backend
    backend.close()


@pytest.fixture
def store(mysql: SQLBackend) -> Iterator[SQLChatMemoryStore]:
    made = mysql.make_store()
    yield made
    mysql.close_store(made)


class Queries:
    """The queries a store's pooled PyMySQL connections send, one per round trip, while recording."""

    def __init__(self, engine: Any) -> None:
        self.sent: list[str] | None = None
        self._engine = engine
        event.listen(engine, "checkout", self._watch)

    def _watch(self, dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if getattr(dbapi_connection, "_recorded_by", None) is self:
            return
        send = dbapi_connection.query

        def query(sql: Any, unbuffered: bool = False) -> Any:
            if self.sent is not None:
                self.sent.append(sql if isinstance(sql, str) else bytes(sql).decode("utf-8", "replace"))
            return send(sql, unbuffered)

        dbapi_connection.query = query
        dbapi_connection._recorded_by = self

    def record(self) -> list[str]:
        self.sent = []
        return self.sent


def _window(turn: int, size: int = 20) -> list[ChatMessage]:
    return [
        UserMessage(f"question {index}") if index % 2 == 0 else AiMessage(f"answer {index}")
        for index in range(turn, turn + size)
    ]


_VERB = re.compile(r"(?:^|; )(BEGIN|UPDATE|DELETE|INSERT|SELECT|COMMIT|ROLLBACK)\b")


def _verbs(sent: list[str]) -> list[str]:
    """Each query as the verbs of its statements (``BEGIN UPDATE INSERT`` for a joined turn)."""
    return [" ".join(_VERB.findall(query)) for query in sent]


def test_a_steady_state_turn_is_one_query_and_a_commit(store: SQLChatMemoryStore) -> None:
    queries = Queries(store.engine)
    store.update_messages("m", _window(0))
    store.update_messages("m", _window(1))
    sent = queries.record()
    store.update_messages("m", _window(2))
    assert _verbs(sent) == ["BEGIN UPDATE DELETE INSERT", "COMMIT"]
    assert store.get_messages("m") == _window(2)


def test_a_turn_that_only_appends_deletes_nothing(store: SQLChatMemoryStore) -> None:
    queries = Queries(store.engine)
    store.update_messages("m", _window(0, 3))
    sent = queries.record()
    store.update_messages("m", [*_window(0, 3), UserMessage("one more")])
    assert _verbs(sent) == ["BEGIN UPDATE INSERT", "COMMIT"]
    assert store.get_messages("m") == [*_window(0, 3), UserMessage("one more")]


def test_a_turn_of_large_messages_goes_statement_by_statement(store: SQLChatMemoryStore) -> None:
    queries = Queries(store.engine)
    store.update_messages("m", _window(0, 3))
    large = [UserMessage("x" * (JOINED_PAYLOAD_LIMIT // 2)), AiMessage("y" * (JOINED_PAYLOAD_LIMIT // 2))]
    sent = queries.record()
    store.update_messages("m", [*_window(0, 3), *large])
    verbs = _verbs(sent)  # one query would hold over a megabyte: the driver's own inserts instead
    assert verbs[:2] == ["BEGIN", "UPDATE"] and set(verbs[2:-1]) == {"INSERT"} and verbs[-1] == "COMMIT", verbs
    assert store.get_messages("m") == [*_window(0, 3), *large]
    sent.clear()
    store.update_messages("m", [*_window(0, 3), *large, UserMessage("small again")])
    assert _verbs(sent) == ["BEGIN UPDATE INSERT", "COMMIT"]


def test_a_stale_snapshot_rolls_the_joined_turn_back_and_writes_under_the_lock(
    mysql: SQLBackend, store: SQLChatMemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    other = SQLChatMemoryStore(mysql.url, table_prefix=store._tables.prefix)
    try:
        store.update_messages("m", _window(0))
        other.update_messages("m", _window(1))  # the same sequence numbers the store's next turn would take
        queries = Queries(store.engine)
        sent = queries.record()
        with caplog.at_level(logging.DEBUG, logger="chatmemory.stores.sql.store"):
            store.update_messages("m", _window(2))
        # The joined turn's head update matched no row; its insert then hit the other writer's rows, an
        # error of the transaction rolled back at once: a stale snapshot, not a conflict to back off from.
        assert _verbs(sent)[:2] == ["BEGIN UPDATE DELETE INSERT", "ROLLBACK"]
        assert "attempts=2" in caplog.text
        assert "conflicts=" not in caplog.text
        assert store.get_messages("m") == _window(2)
        assert other.get_messages("m") == _window(2)
        sent.clear()
        store.update_messages("m", _window(3))  # the lock path refreshed the snapshot: joined again
        assert _verbs(sent) == ["BEGIN UPDATE DELETE INSERT", "COMMIT"]
    finally:
        other.close()


def _turn_on_an_engine_passed_in(mysql: SQLBackend, **engine_options: Any) -> list[str]:
    """The verbs of one steady-state turn of a store on an engine of the caller's; checks what it wrote."""
    engine = create_engine(mysql.url, isolation_level="AUTOCOMMIT", **engine_options)
    store = SQLChatMemoryStore(engine, table_prefix=mysql.fresh_prefix())
    store.create_schema()
    try:
        queries = Queries(engine)
        store.update_messages("m", _window(0))
        sent = queries.record()
        store.update_messages("m", _window(1))
        verbs = _verbs(sent)
        assert store.get_messages("m") == _window(1)
        return verbs
    finally:
        store.drop_schema()
        store.close()
        engine.dispose()


def test_an_engine_without_multiple_statements_sends_the_turn_statement_by_statement(mysql: SQLBackend) -> None:
    assert _turn_on_an_engine_passed_in(mysql) == ["BEGIN", "UPDATE", "DELETE", "INSERT", "COMMIT"]


def test_an_engine_passed_in_with_multiple_statements_joins_its_turns(mysql: SQLBackend) -> None:
    # The README's recipe for an engine of one's own: FOUND_ROWS | MULTI_STATEMENTS, as a store-made one.
    verbs = _turn_on_an_engine_passed_in(mysql, connect_args={"client_flag": 65538})
    assert verbs == ["BEGIN UPDATE DELETE INSERT", "COMMIT"]


def test_cursor_events_see_every_statement_of_a_turn(store: SQLChatMemoryStore) -> None:
    seen: list[str] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement.split(None, 1)[0].upper())

    store.update_messages("m", _window(0))
    event.listen(store.engine, "before_cursor_execute", before)
    try:
        store.update_messages("m", _window(1))
    finally:
        event.remove(store.engine, "before_cursor_execute", before)
    assert seen == ["BEGIN", "UPDATE", "DELETE", "INSERT", "COMMIT"]
    assert store.get_messages("m") == _window(1)


# ------------------------------------------------------------------ rendering (no server needed)


@pytest.fixture(scope="module")
def statements() -> Statements:
    engine = create_engine("mysql+pymysql://nobody@127.0.0.1/none")
    return Statements(build_tables("t_"), engine.dialect, expires=False, history=False, history_expires=False)


def test_a_joined_turn_is_rendered_once_per_shape(statements: Statements) -> None:
    first = statements.joined_turn(1, 1, False)
    assert first is not None
    assert statements.joined_turn(1, 1, False) is first
    assert statements.joined_turn(1, 2, False) is not first
    assert first.sql.startswith("BEGIN; UPDATE t_memories")
    assert statements.joined_turn(SCALAR_DIFF_LIMIT + 1, 1, False) is None
    assert statements.joined_turn(1, SCALAR_DIFF_LIMIT + 1, False) is None


def test_joined_parts_bind_one_set_of_values(statements: Statements) -> None:
    removal, head = statements.removal(2), statements.fast_bump_head
    joined = Joined.of([removal, removal], "BEGIN")
    assert joined.sql == f"BEGIN; {removal.sql}; {removal.sql}"
    whole, parts = joined.bind({"p_id": "m", "p_d0": 3, "p_d1": 4})
    assert whole == removal.bind({"p_id": "m", "p_d0": 3, "p_d1": 4})
    assert parts == [whole, whole]
    positional = render(statements.delete_head, create_engine("sqlite://").dialect)
    with pytest.raises(ValueError, match="paramstyle"):
        Joined.of([head, positional])

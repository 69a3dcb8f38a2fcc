"""A MySQL/MariaDB turn in one round trip: one compound statement on MariaDB; on MySQL one
multi-statement string and a ``COMMIT`` (that path runs here on MariaDB, with the store's blocks off).

The statements are counted where PyMySQL sends them (``Connection.query``, one call per round trip), so
the store's path is the one it takes with no cursor events listened to.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from sqlalchemy import create_engine, event, make_url, text
from sqlalchemy.exc import DBAPIError

from chatmemory import AiMessage, ChatMessage, UserMessage
from chatmemory.stores.sql import SQLChatMemoryStore
from chatmemory.stores.sql.dialect import MISSED_BLOCK_MESSAGE, MYSQL, Joined, render
from chatmemory.stores.sql.outcomes import Failure
from chatmemory.stores.sql.plan import JOINED_PAYLOAD_LIMIT, SCALAR_DIFF_LIMIT
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


@pytest.fixture(params=["block", "joined"])
def form(request: pytest.FixtureRequest) -> str:
    """How the store sends a turn: MariaDB's compound statement, or MySQL's multi-statement string."""
    return str(request.param)


@pytest.fixture
def store(mysql: SQLBackend, form: str) -> Iterator[SQLChatMemoryStore]:
    made = mysql.make_store()
    made._statements.blocks_mariadb_turns = form == "block"
    made.update_messages("warm-up", [UserMessage("hello")])  # the dialect has seen the server
    if form == "block" and not made._statements.blocks_turns:
        mysql.close_store(made)
        pytest.skip("compound statements are MariaDB's")
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


_VERB = re.compile(r"(?:^|; |THEN )(BEGIN|UPDATE|DELETE|INSERT|SELECT|COMMIT|ROLLBACK)\b")
_BLOCK = re.compile(r"BEGIN NOT ATOMIC .*?START TRANSACTION; (.*) COMMIT; ELSE SIGNAL [^;]*; END IF; END", re.S)


def _verbs(sent: list[str]) -> list[str]:
    """Each query as the verbs of its statements: ``BEGIN UPDATE INSERT`` for a multi-statement string,
    ``block: UPDATE INSERT`` for a compound statement (the statements it runs once its head update matched)."""
    verbs = []
    for query in sent:
        block = _BLOCK.fullmatch(query)
        if block is not None:
            verbs.append("block: " + " ".join(_VERB.findall(block.group(1))))
        else:
            verbs.append(" ".join(_VERB.findall(query)))
    return verbs


def _one_turn(form: str, *verbs: str) -> list[str]:
    """The queries of a steady-state turn whose statements are ``verbs`` (after the head update)."""
    if form == "block":
        return [" ".join(("block:", "UPDATE", *verbs))]
    return [" ".join(("BEGIN", "UPDATE", *verbs)), "COMMIT"]


def test_a_steady_state_turn_is_one_round_trip_and_on_mysql_a_commit(store: SQLChatMemoryStore, form: str) -> None:
    queries = Queries(store.engine)
    store.update_messages("m", _window(0))
    store.update_messages("m", _window(1))
    sent = queries.record()
    store.update_messages("m", _window(2))
    assert _verbs(sent) == _one_turn(form, "DELETE", "INSERT")
    assert store.get_messages("m") == _window(2)


def test_a_turn_that_only_appends_deletes_nothing(store: SQLChatMemoryStore, form: str) -> None:
    queries = Queries(store.engine)
    store.update_messages("m", _window(0, 3))
    sent = queries.record()
    store.update_messages("m", [*_window(0, 3), UserMessage("one more")])
    assert _verbs(sent) == _one_turn(form, "INSERT")
    assert store.get_messages("m") == [*_window(0, 3), UserMessage("one more")]


def test_a_turn_of_large_messages_goes_statement_by_statement(store: SQLChatMemoryStore, form: str) -> None:
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
    assert _verbs(sent) == _one_turn(form, "INSERT")


def test_a_stale_snapshot_writes_nothing_of_the_turn_and_writes_under_the_lock(
    mysql: SQLBackend, store: SQLChatMemoryStore, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    other = SQLChatMemoryStore(mysql.url, table_prefix=store._tables.prefix)
    try:
        store.update_messages("m", _window(0))
        other.update_messages("m", _window(1))  # the same sequence numbers the store's next turn would take
        queries = Queries(store.engine)
        sent = queries.record()
        with caplog.at_level(logging.DEBUG, logger="chatmemory.stores.sql.store"):
            store.update_messages("m", _window(2))
        verbs = _verbs(sent)
        if form == "block":
            # The head update matched no row: the block ran nothing else and rolled back by itself.
            assert verbs[0] == "block: UPDATE DELETE INSERT" and verbs[1] == "BEGIN", verbs
        else:
            # The head update matched no row; the insert then hit the other writer's rows, an error of
            # the transaction rolled back at once.
            assert verbs[:2] == ["BEGIN UPDATE DELETE INSERT", "ROLLBACK"]
        # A stale snapshot, not a conflict to back off from.
        assert "attempts=2" in caplog.text
        assert "conflicts=" not in caplog.text
        assert store.get_messages("m") == _window(2)
        assert other.get_messages("m") == _window(2)
        sent.clear()
        store.update_messages("m", _window(3))  # the lock path refreshed the snapshot: one round trip again
        assert _verbs(sent) == _one_turn(form, "DELETE", "INSERT")
    finally:
        other.close()


def test_a_turn_whose_insert_fails_is_rolled_back_and_written_under_the_lock(
    store: SQLChatMemoryStore, form: str
) -> None:
    queries = Queries(store.engine)
    store.update_messages("m", _window(0))
    store.update_messages("m", _window(1))
    messages, memories = store._tables.messages, store._tables.memories
    with store.engine.begin() as connection:  # a row where the next turn's insert goes, the head left as it is
        version = connection.execute(text(f"SELECT version FROM {memories.name} WHERE memory_id = 'm'")).scalar_one()
        last = connection.execute(text(f"SELECT MAX(seq) FROM {messages.name} WHERE memory_id = 'm'")).scalar_one()
        connection.execute(messages.insert().values(memory_id="m", seq=last + 1, payload=b"{}"))
    sent = queries.record()
    store.update_messages("m", _window(2))
    verbs = _verbs(sent)
    # The head update matched, the insert failed: the round trip's transaction is rolled back (by the
    # block itself, or by the ROLLBACK after the string), then the lock path writes the turn.
    first = _one_turn(form, "DELETE", "INSERT")[0]
    assert verbs[:2] == ([first, "BEGIN"] if form == "block" else [first, "ROLLBACK"]), verbs
    assert store.load("m").version > version
    assert store.get_messages("m") == _window(2)


def _turn_on_an_engine_passed_in(mysql: SQLBackend, form: str, **engine_options: Any) -> list[str]:
    """The verbs of one steady-state turn of a store on an engine of the caller's; checks what it wrote."""
    engine = create_engine(mysql.url, isolation_level="AUTOCOMMIT", **engine_options)
    store = SQLChatMemoryStore(engine, table_prefix=mysql.fresh_prefix())
    store._statements.blocks_mariadb_turns = form == "block"
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


def test_an_engine_without_multiple_statements_sends_a_mysql_turn_statement_by_statement(
    store: SQLChatMemoryStore, mysql: SQLBackend, form: str
) -> None:
    # A compound statement is one statement: it needs no multi-statement connection.
    expected = (
        _one_turn(form, "DELETE", "INSERT") if form == "block" else ["BEGIN", "UPDATE", "DELETE", "INSERT", "COMMIT"]
    )
    assert _turn_on_an_engine_passed_in(mysql, form) == expected


def test_an_engine_passed_in_with_multiple_statements_joins_its_turns(
    store: SQLChatMemoryStore, mysql: SQLBackend, form: str
) -> None:
    # The README's recipe for an engine of one's own: FOUND_ROWS | MULTI_STATEMENTS, as a store-made one.
    verbs = _turn_on_an_engine_passed_in(mysql, form, connect_args={"client_flag": 65538})
    assert verbs == _one_turn(form, "DELETE", "INSERT")


def test_cursor_events_see_every_statement_of_a_turn(store: SQLChatMemoryStore, form: str) -> None:
    seen: list[str] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    store.update_messages("m", _window(0))
    event.listen(store.engine, "before_cursor_execute", before)
    try:
        store.update_messages("m", _window(1))
    finally:
        event.remove(store.engine, "before_cursor_execute", before)
    if form == "block":  # one statement: the events see it as it is sent
        assert _verbs(seen) == _one_turn(form, "DELETE", "INSERT")
    else:
        assert [statement.split(None, 1)[0].upper() for statement in seen] == [
            "BEGIN",
            "UPDATE",
            "DELETE",
            "INSERT",
            "COMMIT",
        ]
    assert store.get_messages("m") == _window(1)


def test_a_block_leaves_no_transaction_open_whether_it_commits_misses_or_fails(mysql: SQLBackend) -> None:
    dialect = create_engine("mysql+pymysql://nobody@127.0.0.1/none").dialect

    def block(*statements: str) -> str:
        return Joined.atomic_block([render(text(sql), dialect) for sql in statements]).sql

    url = make_url(mysql.url)
    connection = pymysql.connect(
        host=url.host,
        port=url.port or 3306,
        user=url.username,
        password=url.password or "",
        database=url.database,
        autocommit=True,
    )
    try:
        if "MariaDB" not in connection.get_server_info():
            pytest.skip("compound statements are MariaDB's")
        cursor = connection.cursor()
        cursor.execute("CREATE TEMPORARY TABLE t_x (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
        cursor.execute("INSERT INTO t_x VALUES (1, 0)")

        def state() -> Any:
            cursor.execute("SELECT @@in_transaction, GROUP_CONCAT(id, '=', v ORDER BY id) FROM t_x")
            return cursor.fetchone()

        # The first statement matched, a later one fails: the error as the server raised it, all rolled back.
        with pytest.raises(pymysql.IntegrityError) as failed:
            cursor.execute(
                block("UPDATE t_x SET v = v + 1", "INSERT INTO t_x VALUES (2, 0)", "INSERT INTO t_x VALUES (1, 0)")
            )
        assert failed.value.args[0] == 1062
        assert state() == (0, "1=0")
        # The first statement matched no row: the block signals it, and runs nothing else.
        with pytest.raises(pymysql.OperationalError) as missed:
            cursor.execute(block("UPDATE t_x SET v = 5 WHERE id = 2", "INSERT INTO t_x VALUES (3, 0)"))
        assert missed.value.args == (1644, MISSED_BLOCK_MESSAGE)
        assert state() == (0, "1=0")
        # It matched: everything runs, and is committed.
        cursor.execute(block("UPDATE t_x SET v = v + 1", "INSERT INTO t_x VALUES (2, 0)", "UPDATE t_x SET v = v + 1"))
        assert state() == (0, "1=2,2=1")
    finally:
        connection.close()


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


def test_a_block_turn_is_rendered_once_per_shape_from_the_joined_turns_parts(statements: Statements) -> None:
    block, joined = statements.block_turn(1, 2, False), statements.joined_turn(1, 2, False)
    assert block is not None and joined is not None
    assert statements.block_turn(1, 2, False) is block
    assert block.parts == joined.parts
    head, removal, insert = (part.sql for part in block.parts)
    assert block.sql == (
        "BEGIN NOT ATOMIC DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END; "
        f"START TRANSACTION; {head}; IF ROW_COUNT() = 1 THEN {removal}; {insert}; COMMIT; "
        f"ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{MISSED_BLOCK_MESSAGE}'; END IF; END"
    )
    assert statements.block_turn(SCALAR_DIFF_LIMIT + 1, 1, False) is None
    assert not statements.blocks_turns  # MySQL's dialect: the server was never seen as MariaDB's


@pytest.mark.parametrize(
    ("mariadb", "version", "blocks"),
    [(True, (10, 11, 19), True), (True, (10, 1, 1), True), (True, (10, 0, 38), False), (False, (8, 4, 3), False)],
)
def test_turns_are_blocks_on_mariadb_from_10_1_1(mariadb: bool, version: tuple[int, ...], blocks: bool) -> None:
    dialect: Any = create_engine("mysql+pymysql://nobody@127.0.0.1/none").dialect
    dialect.is_mariadb, dialect.server_version_info = mariadb, version  # as the first connection sets them
    statements = Statements(build_tables("t_"), dialect, expires=False, history=False, history_expires=False)
    assert statements.blocks_turns is blocks
    statements.blocks_mariadb_turns = False
    assert not statements.blocks_turns


def test_only_the_blocks_own_signal_counts_as_a_missed_head() -> None:
    def error(*args: object) -> DBAPIError:
        return DBAPIError("statement", None, pymysql.OperationalError(*args))

    def missed(exc: DBAPIError) -> bool:
        return MYSQL.failure(exc).kind is Failure.MISSED_BLOCK

    assert missed(error(1644, MISSED_BLOCK_MESSAGE))
    assert not missed(error(1644, "Unhandled user-defined exception condition"))  # a SIGNAL of another's
    assert not missed(error(1062, MISSED_BLOCK_MESSAGE))
    assert not missed(error(2013))

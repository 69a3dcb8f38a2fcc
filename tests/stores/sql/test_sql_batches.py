"""How an operation's batches are taken apart for the executors (pure: no database), and what names a failure."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import column, literal_column, select, table
from sqlalchemy.dialects import sqlite

from chatmemory.core.driving import Steps, drive
from chatmemory.stores.base import Operation
from chatmemory.stores.sql import SQLChatMemoryStore
from chatmemory.stores.sql.commands import (
    COMMIT,
    RELEASE,
    ROLLBACK,
    Batch,
    Command,
    Result,
    Statement,
    send_batch,
    send_in_order,
)
from chatmemory.stores.sql.engine import IDS_SLOT, IdsRead
from chatmemory.stores.sql.outcomes import SQLFailure

BEGIN = Statement("BEGIN")
HEAD = Statement("UPDATE head", expect=1)
INSERT = Statement("INSERT rows")


class Boom(Exception):
    """A driver error, as the executor would throw it back in."""


def run(steps: Steps[Command, Any], answer: Callable[[Statement], Any]) -> tuple[list[Any], Any]:
    """Drive ``steps`` as an executor does; ``answer`` gives a statement's result or raises. Return (sent, value)."""
    sent: list[Any] = []

    def perform(command: Any) -> Any:
        if isinstance(command, Batch):
            return send_batch(command, perform)
        sent.append(command.statement if isinstance(command, Statement) else command)
        return answer(command) if isinstance(command, Statement) else None

    value = drive(steps, perform)
    return sent, value


def one_batch(batch: Batch) -> Steps[Command, Any]:
    try:
        results = yield batch
    except Boom as exc:
        return f"raised {exc}"
    yield RELEASE
    return results


def test_a_batch_is_sent_statement_by_statement_and_answered_as_one_list() -> None:
    sent, value = run(one_batch(Batch((HEAD, INSERT))), lambda statement: 1 if statement is HEAD else 7)
    assert sent == ["UPDATE head", "INSERT rows", RELEASE]
    assert value == [1, 7]


def test_a_transaction_batch_commits_after_its_statements() -> None:
    sent, value = run(one_batch(Batch((HEAD, INSERT), BEGIN)), lambda statement: 1)
    assert sent == ["BEGIN", "UPDATE head", "INSERT rows", "COMMIT", RELEASE]
    assert value == [1, 1]


def test_a_missed_expectation_rolls_back_and_stops_the_batch() -> None:
    sent, value = run(one_batch(Batch((HEAD, INSERT), BEGIN)), lambda statement: 0)
    assert sent == ["BEGIN", "UPDATE head", "ROLLBACK", RELEASE]
    assert value == [0]


def test_a_missed_expectation_outside_a_transaction_only_stops_the_batch() -> None:
    sent, value = run(one_batch(Batch((HEAD, INSERT))), lambda statement: 0)
    assert sent == ["UPDATE head", RELEASE]
    assert value == [0]


def _failing(text: str) -> Callable[[Statement], Any]:
    def answer(statement: Statement) -> Any:
        if statement.statement == text:
            raise Boom(text)
        return 1

    return answer


def test_a_failing_statement_is_rolled_back_before_its_error_goes_back() -> None:
    sent, value = run(one_batch(Batch((HEAD, INSERT), BEGIN)), _failing("INSERT rows"))
    assert sent == ["BEGIN", "UPDATE head", "INSERT rows", "ROLLBACK"]
    assert value == "raised INSERT rows"


@pytest.mark.parametrize("text", ["BEGIN", "COMMIT"])
def test_a_failing_begin_or_commit_is_not_rolled_back(text: str) -> None:
    sent, value = run(one_batch(Batch((HEAD, INSERT), BEGIN)), _failing(text))
    assert "ROLLBACK" not in sent and sent[-1] == text
    assert value == f"raised {text}"


def test_a_failing_rollback_goes_back_with_the_error_it_rolled_back_as_context() -> None:
    failures: list[Boom] = []

    def answer(statement: Statement) -> Any:
        if statement in (INSERT, ROLLBACK):
            failures.append(Boom(str(statement.statement)))
            raise failures[-1]
        return 1

    def keep(batch: Batch) -> Steps[Command, Any]:
        try:
            yield batch
        except Boom as exc:
            return exc
        return None

    sent, value = run(keep(Batch((HEAD, INSERT), BEGIN)), answer)
    assert sent == ["BEGIN", "UPDATE head", "INSERT rows", "ROLLBACK"]
    assert value is failures[1] and value.__context__ is failures[0]


def test_commit_and_rollback_are_the_plain_statements() -> None:
    assert (COMMIT.statement, ROLLBACK.statement) == ("COMMIT", "ROLLBACK")


# ------------------------------------------------------------------ a batch with a joined form

JOINED = Statement("BEGIN; UPDATE head; INSERT rows")


def _joined_run(steps: Steps[Command, Any], answer: Callable[[Batch], Any]) -> tuple[list[Any], Any]:
    """Like :func:`run`, with ``answer`` giving a whole batch's results (or raising), as the executor's joined send."""
    sent: list[Any] = []

    def send(command: Any) -> Any:
        if isinstance(command, Batch):  # the batch whole, as send_batch() hands it to the executor
            sent.append(command.joined.statement if command.joined is not None else command)
            return answer(command)
        sent.append(command.statement if isinstance(command, Statement) else command)
        return None

    def perform(command: Any) -> Any:
        return send_batch(command, send) if isinstance(command, Batch) else send(command)

    value = drive(steps, perform)
    return sent, value


def test_a_batch_with_a_joined_form_goes_whole_then_commits() -> None:
    sent, value = _joined_run(one_batch(Batch((HEAD, INSERT), BEGIN, JOINED)), lambda batch: [1, 1])
    assert sent == [JOINED.statement, "COMMIT", RELEASE]
    assert value == [1, 1]


def test_a_joined_batch_that_missed_its_expectation_rolls_back() -> None:
    sent, value = _joined_run(one_batch(Batch((HEAD, INSERT), BEGIN, JOINED)), lambda batch: [0])
    assert sent == [JOINED.statement, "ROLLBACK", RELEASE]
    assert value == [0]


def test_a_joined_batch_missing_its_last_expectation_rolls_back() -> None:
    last = Statement("INSERT rows", expect=1)
    sent, value = _joined_run(one_batch(Batch((HEAD, last), BEGIN, JOINED)), lambda batch: [1, 0])
    assert sent == [JOINED.statement, "ROLLBACK", RELEASE]
    assert value == [1, 0]


def test_a_joined_batch_that_failed_rolls_back_before_its_error_goes_back() -> None:
    def fail(batch: Batch) -> Any:
        raise Boom("joined")

    sent, value = _joined_run(one_batch(Batch((HEAD, INSERT), BEGIN, JOINED)), fail)
    assert sent == [JOINED.statement, "ROLLBACK"]
    assert value == "raised joined"


def test_in_order_sends_begin_and_the_statements_up_to_the_first_miss() -> None:
    batch = Batch((HEAD, INSERT), BEGIN, JOINED)
    sent: list[str] = []

    def answer(statement: Statement) -> int:
        sent.append(statement.statement)
        return 0 if statement is HEAD else 1

    assert send_in_order(batch, answer) == [0]
    assert sent == ["BEGIN", "UPDATE head"]
    sent.clear()
    assert send_in_order(batch, lambda statement: sent.append(statement.statement) or 1) == [1, 1]
    assert sent == ["BEGIN", "UPDATE head", "INSERT rows"]


@pytest.mark.parametrize(
    "command",
    [
        Statement("SELECT * FROM no_such_table", None, Result.ROWS, Operation.READ, "m"),
        Batch((Statement("DELETE FROM no_such_table"),), Statement("BEGIN"), None, Operation.READ, "m"),
    ],
    ids=["statement", "batch"],
)
def test_a_failure_carries_the_operation_and_memory_the_command_named(
    tmp_path: pathlib.Path, command: Statement | Batch
) -> None:
    with SQLChatMemoryStore(f"sqlite:///{tmp_path / 'named.db'}") as store:
        session = store._executor.session()
        with pytest.raises(SQLFailure) as raised:
            session.perform(command)
        session.end(raised.value)
    failure = raised.value
    assert (failure.sent_operation, failure.sent_memory_id) == (Operation.READ, "m")
    assert str(failure.error()).startswith(f"{Operation.READ} failed for memory 'm': (sqlite3.OperationalError)")
    assert str(failure.error(Operation.WRITE, None)).startswith(f"{Operation.WRITE} failed: (sqlite3.OperationalError)")
    assert failure.error().__cause__ is failure.__cause__


# ------------------------------------------------------------------------ a batch read's ids, per driver


def _batch_read(dialect: Any) -> Any:
    ids = literal_column(f"({IDS_SLOT})")
    memory_id = table("t", column("memory_id")).c.memory_id
    statement = (
        select(memory_id).where(memory_id.op("IN")(ids)).union_all(select(memory_id).where(memory_id.op("IN")(ids)))
    )
    return IdsRead.of(statement, dialect, postgres=False)


@pytest.mark.parametrize(
    ("paramstyle", "marks", "parameters"),
    [
        ("qmark", "?, ?", (b"a", b"\xc3\xa9") * 2),
        ("format", "%s, %s", (b"a", b"\xc3\xa9") * 2),
        ("pyformat", "%(p_i0)s, %(p_i1)s", {"p_i0": b"a", "p_i1": b"\xc3\xa9"}),
    ],
)
def test_a_batch_read_writes_a_placeholder_per_id_wherever_its_ids_go(
    paramstyle: str, marks: str, parameters: Any
) -> None:
    dialect = sqlite.dialect(paramstyle=paramstyle)
    sql, bound = _batch_read(dialect).bind(["a", "é"])
    assert sql.count(f"IN ({marks})") == 2
    assert bound == parameters


def test_a_batch_read_names_a_paramstyle_it_cannot_write() -> None:
    with pytest.raises(ValueError, match="'named'"):
        _batch_read(sqlite.dialect(paramstyle="named"))

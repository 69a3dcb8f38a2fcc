"""When the SQL store's operations that change rows try again, and what they say when they give up (pure)."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import DBAPIError

from chatmemory import StoreError
from chatmemory.stores.base import Operation, RetryPolicy
from chatmemory.stores.sql.dialect import MYSQL
from chatmemory.stores.sql.outcomes import SQLFailure, WriteLoop


class _Deadlock(Exception):
    """A MySQL/MariaDB deadlock, as PyMySQL raises it (the error code first)."""

    def __init__(self) -> None:
        super().__init__(1213, "Deadlock found when trying to get lock; try restarting transaction")


def _deadlock() -> DBAPIError:
    return DBAPIError("DELETE ...", {}, _Deadlock())


def _failure(exc: DBAPIError) -> SQLFailure:
    """``exc`` as the executor throws it back in: the dialect's failure, the driver's error its cause."""
    failure = MYSQL.failure(exc)
    failure.__cause__ = exc
    return failure


def _give_up(loop: WriteLoop) -> StoreError:
    """Conflict on every attempt until ``loop`` gives up; return the error it then raises."""
    for _ in range(10_000):
        assert loop.retryable(_failure(_deadlock()))
        try:
            loop.delay()
        except StoreError as exc:
            return exc
    raise AssertionError("the loop never gave up")


_BRIEF = RetryPolicy(budget=0.01, base_delay=0.001, max_delay=0.001)


@pytest.mark.parametrize(
    ("operation", "memory_id", "said"),
    [
        (Operation.DELETE, "m", "deleting the memory failed for memory 'm'"),
        (Operation.TRIM, "m", "trimming the history failed for memory 'm'"),
        (Operation.TRIM, None, "trimming the history failed:"),
        (Operation.PURGE, None, "purging expired memories failed:"),
    ],
)
def test_conflicts_that_outlast_the_policy_name_the_operation_and_its_memory(
    operation: str, memory_id: str | None, said: str
) -> None:
    error = _give_up(WriteLoop(None, _BRIEF, operation, memory_id))
    assert said in str(error)
    assert "conflicted with other writers" in str(error)
    assert isinstance(error.__cause__, DBAPIError)


def test_an_error_that_is_neither_a_conflict_nor_a_lost_connection_goes_through() -> None:
    loop = WriteLoop(None, _BRIEF, Operation.TRIM, None)
    other = _failure(DBAPIError("DELETE ...", {}, Exception(1146, "Table doesn't exist")))
    assert not loop.retryable(other)
    error = other.error(Operation.TRIM, None)
    assert str(error) == 'trimming the history failed: (builtins.Exception) (1146, "Table doesn\'t exist")'
    assert isinstance(error.__cause__, DBAPIError)

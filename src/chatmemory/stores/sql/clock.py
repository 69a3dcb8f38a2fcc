"""The database's clock in SQL: expiry times and version stamps never come from the writer's clock.

A host whose clock runs a minute ahead would otherwise see live memories as expired (and replace them
for everyone), and one running behind would create memories at versions they already had. Each
expression below is rendered per dialect and evaluated by the server in the statement that uses it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, ColumnElement, Float, bindparam
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.sql.type_api import TypeEngine

__all__ = ["ServerClockMicros", "ServerExpiry", "ServerNow", "live"]

# SQLite has no sub-millisecond clock in SQL; the zeros make its text sort and parse like the
# six-digit fractions SQLAlchemy writes for DateTime values.
_SQLITE_NOW = "(strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')"


class ServerNow(FunctionElement[Any]):
    """The server's current time, in the column format of the store's timestamps (UTC)."""

    name = "chatmemory_server_now"
    inherit_cache = True

    def __init__(self, type_: TypeEngine[Any]) -> None:
        super().__init__()
        self.type = type_


class ServerExpiry(FunctionElement[Any]):
    """The server's current time plus ``p_ttl`` seconds (a bound parameter; ``parameter`` names another)."""

    name = "chatmemory_server_expiry"
    inherit_cache = True

    def __init__(self, type_: TypeEngine[Any], parameter: str = "p_ttl") -> None:
        super().__init__(bindparam(parameter, type_=Float()))
        self.type = type_


class ServerClockMicros(FunctionElement[int]):
    """The server's clock in microseconds since the epoch (the version rule's clock)."""

    name = "chatmemory_server_clock_micros"
    type = BigInteger()
    inherit_cache = True


@compiles(ServerNow)
def _now_default(element: ServerNow, compiler: Any, **kw: Any) -> str:
    return "CURRENT_TIMESTAMP"


@compiles(ServerNow, "postgresql")
def _now_postgresql(element: ServerNow, compiler: Any, **kw: Any) -> str:
    return "now()"


@compiles(ServerNow, "mysql")
@compiles(ServerNow, "mariadb")
def _now_mysql(element: ServerNow, compiler: Any, **kw: Any) -> str:
    return "UTC_TIMESTAMP(6)"


@compiles(ServerNow, "sqlite")
def _now_sqlite(element: ServerNow, compiler: Any, **kw: Any) -> str:
    return _SQLITE_NOW


def _ttl(element: ServerExpiry, compiler: Any, **kw: Any) -> str:
    rendered: str = compiler.process(element.clauses, **kw)
    return rendered


@compiles(ServerExpiry, "postgresql")
def _expiry_postgresql(element: ServerExpiry, compiler: Any, **kw: Any) -> str:
    return f"(now() + make_interval(secs => {_ttl(element, compiler, **kw)}))"


@compiles(ServerExpiry, "mysql")
@compiles(ServerExpiry, "mariadb")
def _expiry_mysql(element: ServerExpiry, compiler: Any, **kw: Any) -> str:
    return f"TIMESTAMPADD(MICROSECOND, CAST({_ttl(element, compiler, **kw)} * 1000000 AS SIGNED), UTC_TIMESTAMP(6))"


@compiles(ServerExpiry, "sqlite")
def _expiry_sqlite(element: ServerExpiry, compiler: Any, **kw: Any) -> str:
    return f"(strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || {_ttl(element, compiler, **kw)} || ' seconds') || '000')"


@compiles(ServerClockMicros, "postgresql")
def _micros_postgresql(element: ServerClockMicros, compiler: Any, **kw: Any) -> str:
    return "CAST(extract(epoch FROM clock_timestamp()) * 1000000 AS BIGINT)"


@compiles(ServerClockMicros, "mysql")
@compiles(ServerClockMicros, "mariadb")
def _micros_mysql(element: ServerClockMicros, compiler: Any, **kw: Any) -> str:
    return "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"


@compiles(ServerClockMicros, "sqlite")
def _micros_sqlite(element: ServerClockMicros, compiler: Any, **kw: Any) -> str:
    return "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)"


def live(expires_at: ColumnElement[Any], type_: TypeEngine[Any]) -> ColumnElement[bool]:
    """Whether a head row with this expiry is live by the server's clock."""
    return expires_at.is_(None) | (expires_at > ServerNow(type_))

"""The three databases the SQL store runs on, one object each, and the SQL that differs between them.

:data:`POSTGRESQL`, :data:`MYSQL` (MySQL and MariaDB) and :data:`SQLITE` say how a transaction begins, how
a listing's snapshot does, how a diffed turn goes (one statement on PostgreSQL, one compound statement on
MariaDB, a multi-statement string on MySQL), how timestamps are bound, and what kind of failure a driver
error is (:meth:`SQLDialect.failure`, which the executors raise). The server's clock (:class:`ServerNow`,
:class:`ServerExpiry`, :class:`ServerClockMicros`) and :class:`IdsIn` are rendered per dialect; hot
statements are rendered once in the driver's SQL (:func:`render`: :class:`Rendered`, :class:`Joined`).
"""

from __future__ import annotations

import datetime
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    ClauseElement,
    ColumnElement,
    Dialect,
    Float,
    LargeBinary,
    Select,
    TypeDecorator,
    Update,
    any_,
    bindparam,
    cast,
    delete,
    func,
    insert,
    literal_column,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.exc import CompileError, DBAPIError, SQLAlchemyError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.sql.type_api import TypeEngine

from chatmemory.stores.sql.outcomes import Failure, SQLFailure

if TYPE_CHECKING:  # the schema's module imports this one
    from chatmemory.stores.sql.schema import SchemaTables

__all__ = [
    "MISSED_BLOCK_MESSAGE",
    "MYSQL",
    "POSTGRESQL",
    "SQLITE",
    "IdsIn",
    "MemoryIdType",
    "Joined",
    "Rendered",
    "SQLDialect",
    "ServerClockMicros",
    "ServerExpiry",
    "ServerNow",
    "dialect_family",
    "dialect_of",
    "live",
    "lost_connection",
    "render",
]

MISSED_BLOCK_MESSAGE = "chatmemory: the first statement of the block matched no row"
"""What the store's MariaDB compound statement signals when its first statement matched no row."""
_SIGNAL_MYSQL_CODE = 1644
"""MySQL/MariaDB: the error of a ``SIGNAL SQLSTATE '45000'`` that sets no ``MYSQL_ERRNO`` of its own."""
_MARIADB_BLOCKS = (10, 1, 1)
"""The first MariaDB to run compound statements (``BEGIN NOT ATOMIC``) outside stored programs."""
_FLOOR = datetime.datetime(1970, 1, 2, tzinfo=datetime.timezone.utc)
"""The earliest expiry sent: every column type holds it, and any earlier time expires the memory just as well."""


MEMORY_ID_BYTES = 1020
"""255 characters of at most 4 UTF-8 bytes each."""


class MemoryIdType(TypeDecorator[str]):
    """A memory id, stored as its UTF-8 bytes (lone surrogates kept with ``surrogatepass``)."""

    impl = LargeBinary
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """``VARBINARY(1020)`` on MySQL/MariaDB (a key column needs a length), bytes elsewhere."""
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(mysql.VARBINARY(MEMORY_ID_BYTES))
        return dialect.type_descriptor(LargeBinary())

    def process_bind_param(self, value: str | None, dialect: Dialect) -> bytes | None:
        """The id as UTF-8 bytes."""
        return None if value is None else value.encode("utf-8", "surrogatepass")

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        """The id from its UTF-8 bytes."""
        return None if value is None else bytes(value).decode("utf-8", "surrogatepass")

    @property
    def python_type(self) -> type[str]:
        """``str``."""
        return str


def dialect_family(name: str) -> str:
    """``postgresql``, ``mysql`` (MySQL and MariaDB) or ``sqlite`` for a SQLAlchemy dialect name."""
    return "mysql" if name == "mariadb" else name


class SQLDialect:
    """What differs between the databases, for the store's statements, transactions, parameters and errors."""

    name: ClassVar[str]
    """The family: ``postgresql``, ``mysql`` (MySQL and MariaDB) or ``sqlite``."""
    begin: ClassVar[str] = "BEGIN"
    """How a write transaction starts."""
    snapshot: ClassVar[tuple[str, str | None]] = ("BEGIN", None)
    """How a listing's read-only snapshot transaction starts: ``(begin, statement sent before it)``."""
    has_diff_statement: ClassVar[bool] = False
    """Whether a diffed turn runs as one statement (PostgreSQL's data-modifying CTEs)."""
    joins_turns: ClassVar[bool] = False
    """Whether a diffed turn can also go as one multi-statement string (MySQL/MariaDB)."""
    aware_timestamps: ClassVar[bool] = False
    """Whether timestamp columns take aware times (else naive UTC, as the server's clock writes them)."""
    now_sql: ClassVar[str]
    """The server's time, in the format of the store's timestamps (UTC): writes never use the writer's clock."""
    expiry_sql: ClassVar[str]
    """The server's time plus ``{ttl}`` seconds."""
    micros_sql: ClassVar[str]
    """The server's clock in microseconds since the epoch (the version rule's clock)."""

    def blocks_turns(self, dialect: Any) -> bool:
        """Whether a diffed turn goes as one compound statement on the server ``dialect`` has seen (MariaDB)."""
        return False

    def stamp(self, when: datetime.datetime) -> datetime.datetime:
        """An aware time as a parameter compared with a timestamp column."""
        at = max(when.astimezone(datetime.timezone.utc), _FLOOR)
        return at if self.aware_timestamps else at.replace(tzinfo=None)

    def expiry(self, when: datetime.datetime | None) -> datetime.datetime | None:
        """The ``expires_at`` value for ``when`` (``None``: never).

        Raises:
            ValueError: ``when`` is not an aware datetime.
        """
        if when is None:
            return None
        if not isinstance(when, datetime.datetime) or when.utcoffset() is None:
            raise ValueError(f"expire_at takes an aware datetime (e.g. in UTC) or None, not {when!r}")
        return self.stamp(when)

    def packed(self, fields: Sequence[ColumnElement[Any]]) -> ColumnElement[Any]:
        """``fields`` (integers, none ``NULL``) as one value: their digits separated by spaces, as bytes."""
        return func.concat_ws(literal_column("' '"), *fields)

    def kind(self, exc: DBAPIError) -> Failure:
        """What kind of failure a driver error that did not cost the connection is."""
        return Failure.OTHER

    def failure(self, exc: SQLAlchemyError, max_packet: int | None = None) -> SQLFailure:
        """The error an executor raises for ``exc`` (set it as the cause): its kind and the driver's message."""
        detail = str(exc).splitlines()[0]
        if not isinstance(exc, DBAPIError):
            return SQLFailure(Failure.OTHER, detail)
        kind = Failure.LOST if exc.connection_invalidated else self.kind(exc)
        if max_packet and _mysql_code(exc) in _PACKET_MYSQL_CODES and self.name == "mysql":
            detail += (
                f" (the server's max_allowed_packet is {max_packet} bytes: a larger message "
                "makes MySQL/MariaDB drop the connection)"
            )
        return SQLFailure(kind, detail)


class PostgreSQLDialect(SQLDialect):
    """PostgreSQL (psycopg 3): a diffed turn is one statement of data-modifying CTEs (:meth:`diff_turn`)."""

    name = "postgresql"
    now_sql = "now()"
    expiry_sql = "(now() + make_interval(secs => {ttl}))"
    micros_sql = "CAST(extract(epoch FROM clock_timestamp()) * 1000000 AS BIGINT)"
    snapshot = ("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", None)
    has_diff_statement = True
    aware_timestamps = True
    _CONFLICTS: ClassVar[dict[str, Failure]] = {
        "40001": Failure.CONFLICT,  # serialization failure
        "23505": Failure.CONFLICT,  # unique violation: two writers creating one memory
        "40P01": Failure.DEADLOCK,
    }

    def packed(self, fields: Sequence[ColumnElement[Any]]) -> ColumnElement[Any]:
        """See :meth:`SQLDialect.packed`."""
        return func.convert_to(super().packed(fields), literal_column("'UTF8'"))

    def kind(self, exc: DBAPIError) -> Failure:
        """See :meth:`SQLDialect.kind`."""
        state = getattr(exc.orig, "sqlstate", None)
        return self._CONFLICTS.get(state, Failure.OTHER) if isinstance(state, str) else Failure.OTHER

    def diff_turn(self, tables: SchemaTables, bump_head: Update, history: bool, deleted: int, appended: int) -> Any:
        """A whole steady-state turn as one statement (:func:`_diff_turn`)."""
        return _diff_turn(tables, bump_head, history, deleted, appended)


class MySQLDialect(SQLDialect):
    """MySQL and MariaDB (PyMySQL, asyncmy): a diffed turn as one string, or one MariaDB compound statement."""

    name = "mysql"
    now_sql = "UTC_TIMESTAMP(6)"
    expiry_sql = "TIMESTAMPADD(MICROSECOND, CAST({ttl} * 1000000 AS SIGNED), UTC_TIMESTAMP(6))"
    micros_sql = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"
    snapshot = (
        "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    )
    joins_turns = True
    _CONFLICTS: ClassVar[dict[int, Failure]] = {
        1062: Failure.CONFLICT,  # duplicate key
        1205: Failure.CONFLICT,  # lock wait timeout
        1213: Failure.DEADLOCK,
    }

    def blocks_turns(self, dialect: Any) -> bool:
        """MariaDB 10.1.1 and later, known once the dialect has seen the server (a store's first connection)."""
        return bool(getattr(dialect, "is_mariadb", False)) and (dialect.server_version_info or (0,)) >= _MARIADB_BLOCKS

    def kind(self, exc: DBAPIError) -> Failure:
        """See :meth:`SQLDialect.kind`."""
        code = _mysql_code(exc)
        if code == _SIGNAL_MYSQL_CODE:
            args: tuple[Any, ...] = getattr(exc.orig, "args", ())
            return Failure.MISSED_BLOCK if len(args) > 1 and args[1] == MISSED_BLOCK_MESSAGE else Failure.OTHER
        found = self._CONFLICTS.get(code) if isinstance(code, int) else None
        if found is not None:
            return found
        return Failure.PACKET_TOO_LARGE if code in _PACKET_MYSQL_CODES else Failure.OTHER


class SQLiteDialect(SQLDialect):
    """SQLite (``sqlite3``): ``BEGIN IMMEDIATE`` takes the write lock at once, waiting under the busy timeout.

    (Transactions that read before they write would fail with "database is locked" when two of them try
    to upgrade their locks.)
    """

    name = "sqlite"
    # No sub-millisecond clock in SQL; the zeros make its text sort and parse like SQLAlchemy's fractions.
    now_sql = "(strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')"
    expiry_sql = "(strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || {ttl} || ' seconds') || '000')"
    micros_sql = "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)"
    begin = "BEGIN IMMEDIATE"

    def packed(self, fields: Sequence[ColumnElement[Any]]) -> ColumnElement[Any]:
        """See :meth:`SQLDialect.packed`."""
        joined = fields[0]
        for field_ in fields[1:]:
            joined = joined.op("||")(literal_column("' '")).op("||")(field_)
        return cast(joined, LargeBinary())


POSTGRESQL = PostgreSQLDialect()
MYSQL = MySQLDialect()
SQLITE = SQLiteDialect()
_DIALECTS = {"postgresql": POSTGRESQL, "mysql": MYSQL, "mariadb": MYSQL, "sqlite": SQLITE}


def dialect_of(name: str) -> SQLDialect | None:
    """The dialect object of a SQLAlchemy dialect name (``None``: a database the store does not run on)."""
    return _DIALECTS.get(name)


_PACKET_MYSQL_CODES = frozenset({1153, 1301, 2006, 2013})
"""MySQL/MariaDB: packet too large, result larger than max_allowed_packet, server gone away, lost connection."""


def lost_connection(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a driver error whose connection died under the call (a retry takes a new one)."""
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def _mysql_code(exc: DBAPIError) -> object:
    args: tuple[Any, ...] = getattr(exc.orig, "args", ())
    return args[0] if args else None


# ------------------------------------------------------------------------------------ the server's clock


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


def _family(compiler: Any) -> SQLDialect:
    family = dialect_of(compiler.dialect.name)
    if family is None:  # pragma: no cover - the store checks its database first
        raise CompileError(f"the SQL store does not run on {compiler.dialect.name!r}")
    return family


@compiles(ServerNow)
def _now(element: ServerNow, compiler: Any, **kw: Any) -> str:
    family = dialect_of(compiler.dialect.name)
    return "CURRENT_TIMESTAMP" if family is None else family.now_sql


@compiles(ServerExpiry)
def _expiry(element: ServerExpiry, compiler: Any, **kw: Any) -> str:
    return _family(compiler).expiry_sql.format(ttl=compiler.process(element.clauses, **kw))


@compiles(ServerClockMicros)
def _micros(element: ServerClockMicros, compiler: Any, **kw: Any) -> str:
    return _family(compiler).micros_sql


def live(expires_at: ColumnElement[Any], type_: TypeEngine[Any]) -> ColumnElement[bool]:
    """Whether a head row with this expiry is live by the server's clock."""
    return expires_at.is_(None) | (expires_at > ServerNow(type_))


class IdsIn(FunctionElement[bool]):
    """``column`` is one of the ids bound as ``p_ids`` (a list): ``IN`` their list, or ``= ANY`` their array."""

    name = "chatmemory_ids_in"
    type = Boolean()
    inherit_cache = True
    _is_implicitly_boolean = True  # a predicate as it is: not compared with 1 where booleans are integers


def _column_of(element: IdsIn) -> Any:
    return next(iter(element.clauses))


@compiles(IdsIn)
def _ids_in(element: IdsIn, compiler: Any, **kw: Any) -> str:
    column = _column_of(element)
    return str(compiler.process(column.in_(bindparam("p_ids", expanding=True)), **kw))


@compiles(IdsIn, "postgresql")
def _ids_any(element: IdsIn, compiler: Any, **kw: Any) -> str:
    column = _column_of(element)
    return str(compiler.process(column == any_(bindparam("p_ids", type_=ARRAY(column.type))), **kw))


# ---------------------------------------------------------------------------- the PostgreSQL turn


def _diff_turn(tables: SchemaTables, bump_head: Update, history: bool, deleted: int, appended: int) -> Select[Any]:
    """A whole steady-state turn as one statement of data-modifying CTEs: bump the head, delete, insert.

    The deletes and inserts run only if the head row matched (they read the UPDATE's RETURNING), so a stale
    version changes nothing and returns no row. Rows are ``p_d<i>`` (to delete) and ``p_s<i>``/``p_b<i>``
    (to insert), or arrays of any number when ``deleted == appended == -1``.
    """
    memories, messages = tables.memories, tables.messages
    head = bump_head.returning(memories.c.version).cte("head")
    matched = select(literal_column("1")).select_from(head).exists()
    ctes = []
    if deleted:
        seqs: ColumnElement[bool] = (
            messages.c.seq == any_(bindparam("p_deleted", type_=postgresql.ARRAY(BigInteger)))
            if deleted < 0
            else messages.c.seq.in_([bindparam(f"p_d{index}", type_=BigInteger) for index in range(deleted)])
        )
        if history:
            # With history the evicted rows stay, marked (only those the window's ranges still enclose).
            flag = update(messages).where(messages.c.memory_id == bindparam("p_id"), seqs, matched)
            ctes.append(flag.values(evicted=literal_column("1")).cte("flagged"))
        else:
            ctes.append(delete(messages).where(messages.c.memory_id == bindparam("p_id"), seqs, matched).cte("deleted"))
    if appended:
        memory_id = bindparam("p_id", type_=MemoryIdType())
        # History entries are stamped now(): the transaction's start, the head row's updated_at.
        stamp: list[Any] = [ServerNow(messages.c.written_at.type)] if history else []
        columns = ["memory_id", "seq", "payload", "written_at"] if history else ["memory_id", "seq", "payload"]
        rows: Any
        if appended < 0:
            new_rows = (
                func.unnest(
                    bindparam("p_seqs", type_=postgresql.ARRAY(BigInteger)),
                    bindparam("p_payloads", type_=postgresql.ARRAY(LargeBinary)),
                )
                .table_valued("seq", "payload")
                .render_derived(name="new_rows")
            )
            rows = select(memory_id, new_rows.c.seq, new_rows.c.payload, *stamp).where(matched)
        else:
            selects = [
                select(
                    memory_id,
                    bindparam(f"p_s{index}", type_=BigInteger),
                    bindparam(f"p_b{index}", type_=LargeBinary),
                    *stamp,
                ).where(matched)
                for index in range(appended)
            ]
            rows = union_all(*selects) if appended > 1 else selects[0]
        ctes.append(insert(messages).from_select(columns, rows).cte("inserted"))
    return select(head.c.version).add_cte(*ctes)


# -------------------------------------------------------------------------------- rendered once


@dataclass(frozen=True, slots=True)
class Rendered:
    """A statement rendered once in the driver's SQL, with its parameter names, processors and defaults.

    Sent with :meth:`bind` or :meth:`bind_many` (``positional``: the driver takes tuples): no compile-cache
    lookup or post-compile step per execution; only processors that change what the driver gets run.
    """

    sql: str
    names: tuple[str, ...]
    positional: bool
    processors: Mapping[str, Callable[[Any], Any]]
    defaults: Mapping[str, Any]
    _get: Callable[[Mapping[str, Any]], tuple[Any, ...]] = field(init=False, repr=False, compare=False)
    _process: tuple[tuple[int, Callable[[Any], Any]], ...] = field(init=False, repr=False, compare=False)
    _steps: tuple[tuple[str, Callable[[Any], Any] | None], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Worked out once rather than on every bind. Positional: the values in the statement's order in
        # one C call, then the processors by position (a name may come more than once). Named: each name
        # with its processor, for one dict comprehension (faster than a tuple turned into a dict).
        names = self.names
        get: Callable[[Mapping[str, Any]], tuple[Any, ...]]
        if len(names) == 1:
            (name,) = names
            get = lambda values: (values[name],)  # noqa: E731 - itemgetter of one name gives no tuple
        elif names:
            get = operator.itemgetter(*names)
        else:
            get = lambda values: ()  # noqa: E731
        object.__setattr__(self, "_get", get)
        process = tuple((index, self.processors[name]) for index, name in enumerate(names) if name in self.processors)
        object.__setattr__(self, "_process", process)
        object.__setattr__(self, "_steps", tuple((name, self.processors.get(name)) for name in names))

    def bind(self, values: Mapping[str, Any]) -> Any:
        """The driver's parameters (a tuple, or a dict for a named paramstyle) for named ``values``."""
        if self.defaults:
            values = {**self.defaults, **values}
        if not self.positional:
            return {name: values[name] if process is None else process(values[name]) for name, process in self._steps}
        row = self._get(values)
        if not self._process:
            return row
        processed = list(row)
        for index, process in self._process:
            processed[index] = process(processed[index])
        return tuple(processed)

    def bind_many(self, rows: Sequence[Mapping[str, Any]]) -> list[Any]:
        """The driver's parameters of an ``executemany`` of ``rows``."""
        if self.positional and not self._process and not self.defaults:
            return list(map(self._get, rows))
        return [self.bind(row) for row in rows]


@dataclass(frozen=True, slots=True)
class Joined:
    """Statements (``parts``) rendered once and sent as one string (``sql``): one round trip for all.

    Either ``;``-separated (:meth:`of`), which MySQL/MariaDB run on a connection that allows multiple
    statements, one result per statement; or one MariaDB compound statement (:meth:`atomic_block`), one
    result (or its error). Every part binds from the same named values (``p_id`` is one value).
    """

    sql: str
    parts: tuple[Rendered, ...]

    @classmethod
    def of(cls, parts: Sequence[Rendered], begin: str | None = None) -> Joined:
        """``parts`` joined, after ``begin`` if given (a transaction's ``BEGIN``)."""
        texts = [part.sql for part in _one_paramstyle(parts)]
        return cls("; ".join([begin, *texts] if begin is not None else texts), tuple(parts))

    @classmethod
    def atomic_block(cls, parts: Sequence[Rendered]) -> Joined:
        """``parts`` as one MariaDB compound statement, a transaction of its own (one statement, one result).

        It runs the other parts and commits only if the first changed exactly one row (``ROW_COUNT()``);
        otherwise it signals :data:`MISSED_BLOCK_MESSAGE` (error 1644: a ``Failure.MISSED_BLOCK``), as
        MariaDB does not document the row count of a compound statement. Any error rolls the transaction
        back before it reaches the client (the exit handler): no transaction is left open.
        """
        head, *rest = (part.sql for part in _one_paramstyle(parts))
        guarded = "".join(f"{text}; " for text in rest)
        return cls(
            "BEGIN NOT ATOMIC DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END; "
            f"START TRANSACTION; {head}; IF ROW_COUNT() = 1 THEN {guarded}COMMIT; "
            f"ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{MISSED_BLOCK_MESSAGE}'; END IF; END",
            tuple(parts),
        )

    def bind(self, values: Mapping[str, Any]) -> tuple[Any, list[Any]]:
        """The driver's parameters of the whole string, and of each part, for named ``values``."""
        bound = [part.bind(values) for part in self.parts]
        if self.parts[0].positional:
            return tuple(value for part in bound for value in part), bound
        merged: dict[str, Any] = {}
        for part in bound:
            merged.update(part)
        return merged, bound


def _one_paramstyle(parts: Sequence[Rendered]) -> Sequence[Rendered]:
    if len({part.positional for part in parts}) > 1:
        raise ValueError("joined statements must share one paramstyle")
    return parts


def render(statement: ClauseElement, dialect: Dialect, column_keys: Sequence[str] | None = None) -> Rendered:
    """Compile ``statement`` once for ``dialect`` into a :class:`Rendered` (``column_keys``: an INSERT's)."""
    compiled: Any = statement.compile(
        dialect=dialect,
        column_keys=list(column_keys) if column_keys is not None else None,
        compile_kwargs={"render_postcompile": True},
    )
    positional = bool(compiled.positional)
    names = tuple(compiled.positiontup) if positional else tuple(compiled.binds)
    processors: dict[str, Callable[[Any], Any]] = {}
    for name, given in compiled._bind_processors.items():
        if given is None:
            continue
        processor = _lean_processor(compiled.binds[name].type, given)
        if processor is not None:
            processors[name] = processor
    defaults = {
        name: bind.effective_value
        for name, bind in compiled.binds.items()
        if not bind.required and not name.startswith("p_")
    }
    return Rendered(str(compiled), names, positional, processors, defaults)


_ENCODE_ID: Callable[[str], bytes] = operator.methodcaller("encode", "utf-8", "surrogatepass")
"""A memory id's bytes, as :meth:`MemoryIdType.process_bind_param` makes them, in one C call."""
_SAMPLE_ID = "chatmemory \u00e9"
_SAMPLE_BYTES = b"chatmemory \x00\xff"


def _lean_processor(bind_type: Any, given: Callable[[Any], Any]) -> Callable[[Any], Any] | None:
    """``given``, or what does the same for the driver with less work (``None``: nothing to do).

    Memory ids are ``str`` and payloads ``bytes``: a binary processor that hands the driver the bytes (or
    a ``memoryview`` of them) is dropped, and a memory id's that gives bytes so becomes the encoding alone.
    Any other (psycopg's ``Binary`` wrapper, say) is kept as it is.
    """
    if isinstance(bind_type, MemoryIdType):
        return _ENCODE_ID if _passes_bytes(given(_SAMPLE_ID), _ENCODE_ID(_SAMPLE_ID)) else given
    if isinstance(bind_type, LargeBinary):
        return None if _passes_bytes(given(_SAMPLE_BYTES), _SAMPLE_BYTES) else given
    return given


def _passes_bytes(out: Any, data: bytes) -> bool:
    """Whether a processor's ``out`` for ``data`` is bound by the driver as ``data`` itself would be."""
    if type(out) is bytes:
        return out == data
    return type(out) is memoryview and out.tobytes() == data

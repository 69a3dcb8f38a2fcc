"""Statements rendered once in the driver's SQL, for the hot path (a turn and a read).

A :class:`Rendered` statement skips SQLAlchemy's per-execution compile-cache lookup, parameter
construction and post-compile step: executors send :attr:`Rendered.sql` as driver SQL with the
parameters :meth:`Rendered.bind` makes. Binding takes a positional statement's values in one C call
(``itemgetter``) and runs only the bind processors that change what the driver receives: a processor
that hands the driver a value it binds exactly as the value itself (the ``Binary`` of ``sqlite3``,
aiosqlite, PyMySQL and asyncmy around ``bytes``) is dropped, and a memory id is encoded without
SQLAlchemy's wrapper around the encoding (see :func:`render`, which decides this once per statement by
calling each processor on a sample).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ClauseElement, Dialect, LargeBinary

from chatmemory.stores.sql.engine import MISSED_BLOCK_MESSAGE
from chatmemory.stores.sql.schema import MemoryIdType

__all__ = ["Joined", "Rendered", "render"]


@dataclass(frozen=True, slots=True)
class Rendered:
    """A statement rendered once in the driver's SQL, with what turns named parameters into the driver's.

    Executors run :attr:`sql` with ``exec_driver_sql`` and :meth:`bind` (one row) or :meth:`bind_many`:
    no compile-cache lookup, parameter construction or post-compile step per execution.

    Attributes:
        sql: the statement in the driver's paramstyle.
        names: the parameter names (in the statement's order when :attr:`positional`).
        positional: whether the driver takes a tuple (else a mapping).
        processors: bind processors by parameter name (a memory id's encoding, a blob wrapper).
        defaults: values of parameters the statement fixes itself.
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
    """Statements rendered once and sent as one string: one round trip for all of them.

    Either ``;``-separated (:meth:`of`), which MySQL/MariaDB run when the connection was opened with
    multiple statements allowed (``CLIENT.MULTI_STATEMENTS``), answering with one result per statement;
    or one MariaDB compound statement (:meth:`atomic_block`), which any connection runs, answered with
    one result (or its error). Every part binds its parameters from the same named values, so a name the
    parts share (``p_id``) is one value.

    Attributes:
        sql: the string sent.
        parts: the statements, in order.
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

        The block begins a transaction and runs the first part; only if that changed exactly one row
        (``ROW_COUNT()``) does it run the other parts and commit. Otherwise it signals
        :data:`~chatmemory.stores.sql.engine.MISSED_BLOCK_MESSAGE` (``SQLSTATE '45000'``, error 1644,
        :func:`~chatmemory.stores.sql.engine.is_missed_block`): the client learns of the miss from the
        error, not from the rows the block reports, whose count MariaDB does not document for compound
        statements. An error in any part, that signal included, rolls the transaction back before it
        goes to the client (the exit handler), so the block leaves no transaction open whatever happens.
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

    The values a rendered statement binds are the store's own: memory ids are ``str`` (never ``None``) and
    payloads ``bytes``. A binary processor that hands the driver the bytes themselves, or a ``memoryview`` of them
    (which ``sqlite3`` binds as it binds the bytes), is dropped; a memory id's processor that gives bytes so
    (its encoding, then such a wrapper) becomes the encoding alone. Any other processor (psycopg's
    ``Binary`` wrapper, say) is kept as it is.
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

"""Statements rendered once in the driver's SQL, for the hot path (a turn and a read).

A :class:`Rendered` statement skips SQLAlchemy's per-execution compile-cache lookup, parameter
construction and post-compile step: executors send :attr:`Rendered.sql` as driver SQL with the
parameters :meth:`Rendered.bind` makes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ClauseElement, Dialect

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
    _steps: tuple[tuple[str, Callable[[Any], Any] | None], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Each parameter with its processor (or None), looked up once rather than on every bind.
        steps = tuple((name, self.processors.get(name)) for name in self.names)
        object.__setattr__(self, "_steps", steps)

    def bind(self, values: Mapping[str, Any]) -> Any:
        """The driver's parameters (a tuple, or a dict for a named paramstyle) for named ``values``."""
        if self.defaults:
            values = {**self.defaults, **values}
        if self.positional:
            return tuple([values[name] if process is None else process(values[name]) for name, process in self._steps])
        return {name: values[name] if process is None else process(values[name]) for name, process in self._steps}

    def bind_many(self, rows: Sequence[Mapping[str, Any]]) -> list[Any]:
        """The driver's parameters of an ``executemany`` of ``rows``."""
        return [self.bind(row) for row in rows]


@dataclass(frozen=True, slots=True)
class Joined:
    """Statements rendered once and sent as one string, ``;``-separated: one round trip for all of them.

    MySQL/MariaDB run such a string when the connection was opened with multiple statements allowed
    (``CLIENT.MULTI_STATEMENTS``), and answer with one result per statement. Every part binds its
    parameters from the same named values, so a name the parts share (``p_id``) is one value.

    Attributes:
        sql: ``BEGIN`` (when :attr:`begin`), then each part, separated by ``;``.
        parts: the statements, in order.
    """

    sql: str
    parts: tuple[Rendered, ...]

    @classmethod
    def of(cls, parts: Sequence[Rendered], begin: str | None = None) -> Joined:
        """``parts`` joined, after ``begin`` if given (a transaction's ``BEGIN``)."""
        if len({part.positional for part in parts}) > 1:
            raise ValueError("joined statements must share one paramstyle")
        texts = [part.sql for part in parts]
        return cls("; ".join([begin, *texts] if begin is not None else texts), tuple(parts))

    def bind(self, values: Mapping[str, Any]) -> tuple[Any, list[Any]]:
        """The driver's parameters of the whole string, and of each part, for named ``values``."""
        bound = [part.bind(values) for part in self.parts]
        if self.parts[0].positional:
            return tuple(value for part in bound for value in part), bound
        merged: dict[str, Any] = {}
        for part in bound:
            merged.update(part)
        return merged, bound


def render(statement: ClauseElement, dialect: Dialect, column_keys: Sequence[str] | None = None) -> Rendered:
    """Compile ``statement`` once for ``dialect`` into a :class:`Rendered` (``column_keys``: an INSERT's)."""
    compiled: Any = statement.compile(
        dialect=dialect,
        column_keys=list(column_keys) if column_keys is not None else None,
        compile_kwargs={"render_postcompile": True},
    )
    positional = bool(compiled.positional)
    names = tuple(compiled.positiontup) if positional else tuple(compiled.binds)
    processors = {name: processor for name, processor in compiled._bind_processors.items() if processor is not None}
    defaults = {
        name: bind.effective_value
        for name, bind in compiled.binds.items()
        if not bind.required and not name.startswith("p_")
    }
    return Rendered(str(compiled), names, positional, processors, defaults)

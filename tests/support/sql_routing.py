"""Whether a SQL statement the store sent is routed by one memory's id, as Citus routes a query to one shard.

:func:`routing_faults` reads a statement as PostgreSQL receives it from psycopg (``%(name)s`` parameters)
and says what keeps it from being routed by ``memory_id``: each reference to one of the store's tables,
in every ``SELECT``, ``UPDATE``, ``DELETE``, CTE, ``UNION ALL`` branch and subquery, must be tied to a
parameter holding the memory's id by ``memory_id`` equalities in a ``WHERE`` or ``ON`` clause (directly,
or through a join or correlation on ``memory_id`` to a reference that is); each row an ``INSERT`` adds
must take that parameter as its ``memory_id``. An equality inside parentheses or beside a top-level
``OR`` does not count (it may not hold), nor does ``IN`` / ``= ANY``. A parameter holding another id is
a fault too: the statement would touch another memory's rows.

A small reader for the statements SQLAlchemy renders for the store, not a SQL parser: what it does not
understand (a store table it finds no reference to, a table that is not the store's) is a fault too,
so a new statement shape fails until it is looked at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Captured", "memory_id_bytes", "routing_faults"]

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<param>%\((?P<name>\w+)\)s)
      | (?P<string>'(?:[^']|'')*')
      | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
      | (?P<number>\d+(?:\.\d+)?)
      | (?P<op>::|\|\||<=|>=|<>|!=|=>|\[\]|[=<>(),.*+\-/;])
    )""",
    re.VERBOSE,
)
_QUERY_STARTS = {"SELECT", "UPDATE", "DELETE", "INSERT", "WITH"}
_SET_OPERATORS = {"UNION", "INTERSECT", "EXCEPT"}
_CLAUSES = {"FROM", "JOIN", "ON", "WHERE", "SET", "RETURNING", "ORDER", "GROUP", "HAVING", "LIMIT", "OFFSET", "FOR"}
_KEYWORDS = _CLAUSES | _SET_OPERATORS | _QUERY_STARTS | {"AS", "LEFT", "RIGHT", "INNER", "OUTER", "CROSS", "VALUES"}


@dataclass
class Captured:
    """One statement as the driver got it: its SQL and parameters (a list of rows for ``executemany``)."""

    sql: str
    parameters: Any

    def rows(self) -> list[Mapping[str, Any]]:
        """The parameter rows: one per execution of the statement."""
        if isinstance(self.parameters, Mapping):
            return [self.parameters]
        if isinstance(self.parameters, Sequence) and not isinstance(self.parameters, (str, bytes)):
            return [row if isinstance(row, Mapping) else {} for row in self.parameters] or [{}]
        return [{}]


def memory_id_bytes(value: Any) -> bytes | None:
    """A bound memory id as bytes (psycopg's ``Binary`` wrapper, bytes, or text); ``None`` if it is none."""
    value = getattr(value, "obj", value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return None


# ------------------------------------------------------------------------------------------------ tokens


@dataclass
class _Token:
    kind: str
    text: str

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else self.text


_Item = Any  # a _Token, or a list of items (a parenthesized group)


def _tokens(sql: str) -> list[_Token]:
    found: list[_Token] = []
    position = 0
    sql = sql.strip()
    while position < len(sql):
        match = _TOKEN.match(sql, position)
        if match is None or match.end() == position:
            raise ValueError(f"cannot read the statement at {sql[position : position + 40]!r}")
        kind = next(name for name in ("param", "string", "word", "number", "op") if match.group(name))
        found.append(_Token(kind, match.group("name") if kind == "param" else match.group(kind)))
        position = match.end()
    return found


def _nest(tokens: list[_Token]) -> list[_Item]:
    stack: list[list[_Item]] = [[]]
    for token in tokens:
        if token.text == "(" and token.kind == "op":
            stack.append([])
        elif token.text == ")" and token.kind == "op":
            group = stack.pop()
            stack[-1].append(group)
        else:
            stack[-1].append(token)
    if len(stack) != 1:
        raise ValueError("unbalanced parentheses")
    return stack[0]


def _is(item: _Item, *texts: str) -> bool:
    return isinstance(item, _Token) and item.upper in texts


def _is_query(group: _Item) -> bool:
    return isinstance(group, list) and bool(group) and isinstance(group[0], _Token) and group[0].upper in _QUERY_STARTS


def _split(items: list[_Item], separator: str) -> list[list[_Item]]:
    parts: list[list[_Item]] = [[]]
    for item in items:
        if _is(item, separator):
            parts.append([])
        else:
            parts[-1].append(item)
    return parts


# ------------------------------------------------------------------------------------------------ scopes


@dataclass(eq=False)
class _Reference:
    """A table named in a FROM, JOIN, UPDATE, DELETE or INSERT: its name and the name it is known by."""

    table: str
    known_as: str


@dataclass(eq=False)
class _Scope:
    parent: _Scope | None
    references: list[_Reference] = field(default_factory=list)

    def resolve(self, name: str) -> _Reference | None:
        scope: _Scope | None = self
        while scope is not None:
            for reference in scope.references:
                if reference.known_as == name:
                    return reference
            scope = scope.parent
        return None


class _Reader:
    """Reads one statement: its references, the equalities tying them to parameters, its inserted rows."""

    def __init__(self, store_tables: Iterable[str], rows: list[Mapping[str, Any]], memory_id: bytes) -> None:
        self.store_tables = set(store_tables)
        self.rows = rows
        self.memory_id = memory_id
        self.faults: list[str] = []
        self.references: list[_Reference] = []
        self.ctes: set[str] = set()
        self._parent: dict[object, object] = {}

    # union-find over references and parameter names
    def _find(self, node: object) -> object:
        while self._parent.get(node, node) is not node:
            node = self._parent[node]
        return node

    def _union(self, first: object, second: object) -> None:
        self._parent.setdefault(first, first)
        self._parent.setdefault(second, second)
        self._parent[self._find(first)] = self._find(second)

    # ----------------------------------------------------------------------------------------- reading

    def read(self, items: list[_Item], parent: _Scope | None) -> None:
        """A query (or a list of ``UNION ALL`` branches): each branch a scope of its own."""
        if items and _is(items[0], "WITH"):
            items = self._with(items, parent)
        if items and _is(items[0], "INSERT"):
            self._insert(items, parent)
            return
        branch: list[_Item] = []
        for item in [*items, None]:
            if item is None or (isinstance(item, _Token) and item.upper in _SET_OPERATORS):
                if branch:
                    self._branch(branch, parent)
                branch = []
            elif not _is(item, "ALL"):
                branch.append(item)

    def _with(self, items: list[_Item], parent: _Scope | None) -> list[_Item]:
        """Read the CTEs of ``WITH a AS (...), b AS (...)`` and return the main query after them."""
        index = 1
        while index + 2 < len(items) and _is(items[index + 1], "AS") and isinstance(items[index + 2], list):
            self.ctes.add(items[index].text)
            self.read(items[index + 2], parent)
            index += 3
            if index < len(items) and _is(items[index], ","):
                index += 1
        return items[index:]

    def _branch(self, items: list[_Item], parent: _Scope | None) -> None:
        scope = _Scope(parent)
        index = 0
        while index < len(items):
            item = items[index]
            after_for = index > 0 and _is(items[index - 1], "FOR")  # FOR UPDATE: a lock, not a table
            if _is(item, "FROM", "JOIN", "UPDATE", "INTO") and not after_for and index + 1 < len(items):
                index = self._declare(items, index + 1, scope)
                continue
            index += 1
        self._equalities(scope, items)
        self._subqueries(items, scope)

    def _declare(self, items: list[_Item], index: int, scope: _Scope) -> int:
        """Declare the table at ``items[index]`` (and those after commas); return where reading goes on."""
        while index < len(items):
            name = items[index]
            if not isinstance(name, _Token) or name.kind != "word" or name.upper in _KEYWORDS:
                return index  # a subquery or a function in FROM: read as a subquery
            if index + 1 < len(items) and isinstance(items[index + 1], list):
                return index + 1  # a function call (unnest(...) AS new_rows(...))
            index += 1
            known_as = name.text
            if index + 1 < len(items) and _is(items[index], "AS") and isinstance(items[index + 1], _Token):
                known_as = items[index + 1].text
                index += 2
            elif index < len(items) and isinstance(items[index], _Token):
                following = items[index]
                if following.kind == "word" and following.upper not in _KEYWORDS and following.upper != "SET":
                    known_as = following.text
                    index += 1
            reference = _Reference(name.text, known_as)
            scope.references.append(reference)
            self.references.append(reference)
            if index < len(items) and _is(items[index], ","):
                index += 1
                continue
            return index
        return index

    def _subqueries(self, items: list[_Item], scope: _Scope) -> None:
        for item in items:
            if isinstance(item, list):
                if _is_query(item):
                    self.read(item, scope)
                else:
                    self._subqueries(item, scope)

    def _equalities(self, scope: _Scope, items: list[_Item]) -> None:
        """``a.memory_id = <param or b.memory_id>`` at the top level of WHERE and ON clauses without OR."""
        clause: str | None = None
        parts: list[list[_Item]] = []
        for item in items:
            if isinstance(item, _Token) and item.upper in _CLAUSES:
                clause = item.upper
                if clause in ("WHERE", "ON"):
                    parts.append([])
                continue
            if clause in ("WHERE", "ON"):
                parts[-1].append(item)
        for part in parts:
            if any(_is(item, "OR") for item in part):
                continue
            for index, item in enumerate(part):
                if not (_is(item, "=") and 0 < index < len(part) - 1):
                    continue
                if index >= 2 and _is(part[index - 2], "NOT"):
                    continue
                left = self._operand(part[:index], scope, from_end=True)
                right = self._operand(part[index + 1 :], scope, from_end=False)
                # One side at least is a reference: two parameters equal to each other route nothing.
                if (
                    left is not None
                    and right is not None
                    and not (isinstance(left, tuple) and isinstance(right, tuple))
                ):
                    self._union(left, right)

    def _operand(self, items: list[_Item], scope: _Scope, *, from_end: bool) -> object | None:
        """The reference (``x.memory_id``) or parameter next to an ``=``, or ``None`` for anything else."""
        if not from_end:
            if items and isinstance(items[0], _Token) and items[0].kind == "param":
                return ("param", items[0].text)
            if len(items) >= 3 and _is(items[1], ".") and isinstance(items[2], _Token):
                if items[2].text.lower() != "memory_id":
                    return None
                return self._reference_node(items[0], scope)
            return None
        tail = items[-4:]
        # "%(p)s" or "%(p)s::TYPE" before the "="
        if tail and isinstance(tail[-1], _Token) and tail[-1].kind == "param":
            return ("param", tail[-1].text)
        if len(tail) >= 3 and _is(tail[-2], ".") and isinstance(tail[-1], _Token):
            if tail[-1].text.lower() != "memory_id":
                return None
            return self._reference_node(tail[-3], scope)
        return None

    def _reference_node(self, name: _Item, scope: _Scope) -> object | None:
        if not isinstance(name, _Token):
            return None
        reference = scope.resolve(name.text)
        if reference is None:
            self.faults.append(f"{name.text}.memory_id names no table in scope")
            return None
        return reference

    # ------------------------------------------------------------------------------------------ INSERT

    def _insert(self, items: list[_Item], parent: _Scope | None) -> None:
        scope = _Scope(parent)
        if len(items) < 4 or not _is(items[1], "INTO") or not isinstance(items[3], list):
            self.faults.append("an INSERT without a column list")
            return
        reference = _Reference(items[2].text, items[2].text)
        scope.references.append(reference)
        self.references.append(reference)
        columns = [item.text.lower() for item in items[3] if isinstance(item, _Token) and item.kind == "word"]
        if "memory_id" not in columns:
            self.faults.append(f"an INSERT into {reference.table} without memory_id")
            return
        position = columns.index("memory_id")
        rest = items[4:]
        rows: list[list[_Item]] = []
        if rest and _is(rest[0], "VALUES"):
            rows = [group for group in rest[1:] if isinstance(group, list)]
            values = [_split(group, ",")[position] if len(_split(group, ",")) > position else [] for group in rows]
            for group in rows:
                self._subqueries(group, scope)
        else:
            values = []
            for branch in _split_branches(rest):
                select_list: list[_Item] = []
                for item in branch[1:]:
                    if isinstance(item, _Token) and item.upper in ("FROM", "WHERE"):
                        break
                    select_list.append(item)
                columns_out = _split(select_list, ",")
                values.append(columns_out[position] if len(columns_out) > position else [])
                self.read(branch, scope)
        if not values:
            self.faults.append(f"an INSERT into {reference.table} with no rows read")
        for value in values:
            if not (value and isinstance(value[0], _Token) and value[0].kind == "param"):
                self.faults.append(f"an INSERT into {reference.table} whose memory_id is not a parameter")
                return
            self._union(reference, ("param", value[0].text))

    # -------------------------------------------------------------------------------------------- judging

    def judge(self) -> list[str]:
        faults = list(self.faults)
        for reference in self.references:
            if reference.table in self.ctes:
                continue
            if reference.table not in self.store_tables:
                faults.append(f"touches {reference.table}, not one of the store's tables")
                continue
            root = self._find(reference)
            params = [node[1] for node in self._parent if isinstance(node, tuple) and self._find(node) is root]
            if not params:
                faults.append(f"{reference.table} AS {reference.known_as} is not filtered on memory_id")
                continue
            for name in params:
                for row in self.rows:
                    if name not in row:
                        faults.append(f"parameter {name} of {reference.known_as}.memory_id is not bound")
                        continue
                    value = memory_id_bytes(row[name])
                    if value != self.memory_id:
                        faults.append(
                            f"{reference.known_as}.memory_id = {name} holds {value!r}, not the memory's "
                            f"{self.memory_id!r}"
                        )
        return faults


def _split_branches(items: list[_Item]) -> list[list[_Item]]:
    branches: list[list[_Item]] = [[]]
    for item in items:
        if isinstance(item, _Token) and item.upper in _SET_OPERATORS:
            branches.append([])
        elif not (_is(item, "ALL") and not branches[-1]):
            branches[-1].append(item)
    return [branch for branch in branches if branch]


def routing_faults(statement: Captured, store_tables: Iterable[str], memory_id: str) -> list[str]:
    """What keeps ``statement`` from being routed by ``memory_id`` alone; empty when it is routed.

    A statement that names none of the store's tables (``BEGIN``, ``COMMIT``, the server's clock) touches
    no memory's rows and is routed trivially. A store table named in the text but not read as a
    reference is a fault: the reader did not understand the statement.
    """
    tables = set(store_tables)
    reader = _Reader(tables, statement.rows(), memory_id.encode("utf-8", "surrogatepass"))
    try:
        reader.read(_nest(_tokens(statement.sql.rstrip("; \n"))), None)
    except (ValueError, IndexError) as exc:
        return [f"not understood: {exc}"]
    words = {token.text for token in _tokens(statement.sql) if token.kind == "word"}
    read = {reference.table for reference in reader.references}
    faults = [f"{table} is named but not read as a table" for table in sorted((words & tables) - read)]
    return faults + reader.judge()

"""A pure-Python evaluator of the update pipelines the MongoDB store sends, for plan tests without a server.

It knows only the stages and operators :mod:`chatmemory.stores.mongodb.plan` uses, with MongoDB's
semantics for them (missing fields, ``$$REMOVE``, truthiness, dates plus milliseconds). A plan that uses
anything else fails here with ``KeyError``, so the tests notice.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

MISSING: Any = object()
REMOVE: Any = object()
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _ms(value: datetime.datetime) -> int:
    return (value - EPOCH) // datetime.timedelta(milliseconds=1)


def _type(value: Any) -> str:
    if value is MISSING:
        return "missing"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, datetime.datetime):
        return "date"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    if value is None:
        return "null"
    return type(value).__name__


def evaluate(expression: Any, document: Mapping[str, Any], now: datetime.datetime, this: Any = MISSING) -> Any:
    """The value of an aggregation ``expression`` on ``document`` at server time ``now``."""

    def ev(value: Any) -> Any:
        return evaluate(value, document, now, this)

    if isinstance(expression, str) and expression.startswith("$$"):
        name, _, path = expression[2:].partition(".")
        base = {"NOW": now, "ROOT": document, "REMOVE": REMOVE, "this": this}[name]
        return base.get(path, MISSING) if path and isinstance(base, Mapping) else base
    if isinstance(expression, str) and expression.startswith("$"):
        return document.get(expression[1:], MISSING)
    if isinstance(expression, list):
        return [ev(item) for item in expression]
    if not isinstance(expression, Mapping):
        return expression
    if len(expression) != 1 or not next(iter(expression)).startswith("$"):
        return {key: ev(value) for key, value in expression.items()}
    ((operator, argument),) = expression.items()
    if operator == "$literal":
        return argument
    if operator == "$cond":
        condition, then, otherwise = argument
        return ev(then) if _is_true(ev(condition)) else ev(otherwise)
    if operator == "$map":
        items = ev(argument["input"])
        return [evaluate(argument["in"], document, now, item) for item in items]
    args = [ev(item) for item in argument] if isinstance(argument, list) else [ev(argument)]
    return _OPERATORS[operator](*args)


def _is_true(value: Any) -> bool:
    return not (value is MISSING or value is None or value is False or (isinstance(value, (int, float)) and value == 0))


def _add(*values: Any) -> Any:
    dates = [value for value in values if isinstance(value, datetime.datetime)]
    total = sum(value for value in values if not isinstance(value, datetime.datetime))
    return dates[0] + datetime.timedelta(milliseconds=total) if dates else total


def _slice(array: list[Any], count: int) -> list[Any]:
    return array[count:] if count < 0 else array[:count]


_OPERATORS: dict[str, Any] = {
    "$and": lambda *values: all(_is_true(value) for value in values),
    "$or": lambda *values: any(_is_true(value) for value in values),
    "$not": lambda value: not _is_true(value),
    "$eq": lambda left, right: left == right,
    "$gt": lambda left, right: left > right,
    "$type": _type,
    "$toLong": lambda value: _ms(value) if isinstance(value, datetime.datetime) else int(value),
    "$isArray": lambda value: isinstance(value, list),
    "$isNumber": lambda value: isinstance(value, (int, float)) and not isinstance(value, bool),
    "$add": _add,
    "$max": lambda *values: max(values),
    "$multiply": lambda left, right: left * right,
    "$in": lambda value, array: value in array,
    "$size": len,
    "$objectToArray": lambda value: [{"k": key, "v": item} for key, item in value.items()],
    "$slice": _slice,
    "$concatArrays": lambda *arrays: [item for array in arrays for item in array],
}


def _apply_operators(current: dict[str, Any], update: Mapping[str, Any], now: datetime.datetime) -> dict[str, Any]:
    """Update operators, as MongoDB applies the few the store uses."""
    for operator, fields in update.items():
        for field, value in fields.items():
            if operator == "$set":
                current[field] = value
            elif operator == "$unset":
                current.pop(field, None)
            elif operator == "$inc":
                current[field] = current.get(field, 0) + value
            elif operator == "$currentDate":
                current[field] = now
            elif operator == "$push":
                array = [*current.get(field, []), *value["$each"]]
                count = value.get("$slice")
                current[field] = array if count is None else _slice(array, count) if count else []
            else:
                raise KeyError(operator)
    return current


def apply_update(
    document: dict[str, Any] | None,
    query: Mapping[str, Any],
    pipeline: list[dict[str, Any]] | dict[str, Any],
    now: datetime.datetime,
) -> dict[str, Any]:
    """The document after ``pipeline`` or update operators (an upsert starts from the query's ``_id``)."""
    current = dict(document) if document is not None else {"_id": query["_id"]}
    if isinstance(pipeline, Mapping):
        return _apply_operators(current, pipeline, now)
    for stage in pipeline:
        ((name, argument),) = stage.items()
        if name == "$set":
            values = {field: evaluate(expression, current, now) for field, expression in argument.items()}
            for field, value in values.items():
                if value is MISSING or value is REMOVE:
                    current.pop(field, None)
                else:
                    current[field] = value
        elif name == "$unset":
            for field in [argument] if isinstance(argument, str) else argument:
                current.pop(field, None)
        else:
            raise KeyError(name)
    return current


def matches(document: Mapping[str, Any], query: Mapping[str, Any], now: datetime.datetime) -> bool:
    """Whether ``document`` matches ``query`` (equality, ``$eq``, ``$type: "array"`` and ``$expr`` only)."""
    for field, condition in query.items():
        if field == "$expr":
            if not _is_true(evaluate(condition, document, now)):
                return False
            continue
        value = document.get(field, MISSING)
        if isinstance(condition, Mapping):
            ((operator, argument),) = condition.items()
            if operator == "$eq":
                if value != argument:
                    return False
            elif operator == "$type" and argument == "array":
                if not isinstance(value, list):
                    return False
            else:
                raise KeyError(operator)
        elif value != condition:
            return False
    return True

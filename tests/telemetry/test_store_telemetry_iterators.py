"""A store method that yields (``memory_ids``) is one operation from its first item to its end, sync and async.

The decorators in ``chatmemory.stores.base.facade`` are exercised on a small class of their own, so each
way an iteration can end is checked: run to its end, stopped early by the caller, failed part-way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from opentelemetry.trace import StatusCode

from chatmemory import StoreError
from chatmemory.stores.base.facade import StoreTelemetry
from telemetry.recording import Recorded

_traced = StoreTelemetry("example", "chatmemory.stores.example")


class _Ids:
    def __init__(self, fail_after: int | None = None) -> None:
        self.fail_after = fail_after
        self.closed = False

    @_traced.iterator("list")
    def memory_ids(self) -> Iterator[str]:
        try:
            for index in range(5):
                if index == self.fail_after:
                    raise StoreError("listing memories", None, "the server went away")
                yield f"m{index}"
        finally:
            self.closed = True

    @_traced.async_iterator("list")
    async def amemory_ids(self) -> AsyncIterator[str]:
        try:
            for index in range(5):
                if index == self.fail_after:
                    raise StoreError("listing memories", None, "the server went away")
                yield f"m{index}"
        finally:
            self.closed = True


def _only_span(recorded: Recorded) -> object:
    spans = recorded.finished()
    assert [span.name for span in spans] == ["chatmemory list"]
    return spans[0]


def test_an_iteration_run_to_its_end_is_one_span_counting_its_items(recorded: Recorded) -> None:
    ids = _Ids()
    assert list(ids.memory_ids()) == [f"m{index}" for index in range(5)]
    span = _only_span(recorded)
    assert span.status.status_code is not StatusCode.ERROR  # type: ignore[attr-defined]
    assert span.attributes["chatmemory.items"] == 5  # type: ignore[attr-defined]
    assert ids.closed


def test_an_iteration_stopped_early_is_no_error_and_closes_the_source(recorded: Recorded) -> None:
    ids = _Ids()
    iterator = ids.memory_ids()
    assert next(iterator) == "m0"
    assert next(iterator) == "m1"
    iterator.close()  # type: ignore[attr-defined]
    span = _only_span(recorded)
    assert span.status.status_code is not StatusCode.ERROR  # type: ignore[attr-defined]
    assert span.attributes["chatmemory.items"] == 2  # type: ignore[attr-defined]
    assert ids.closed


def test_an_iteration_that_fails_part_way_is_an_error_span(recorded: Recorded) -> None:
    ids = _Ids(fail_after=3)
    with pytest.raises(StoreError, match="the server went away"):
        list(ids.memory_ids())
    span = _only_span(recorded)
    assert span.status.status_code is StatusCode.ERROR  # type: ignore[attr-defined]
    assert span.attributes["chatmemory.items"] == 3  # type: ignore[attr-defined]
    assert ids.closed


async def test_an_async_iteration_run_to_its_end_is_one_span_counting_its_items(recorded: Recorded) -> None:
    ids = _Ids()
    assert [item async for item in ids.amemory_ids()] == [f"m{index}" for index in range(5)]
    span = _only_span(recorded)
    assert span.status.status_code is not StatusCode.ERROR  # type: ignore[attr-defined]
    assert span.attributes["chatmemory.items"] == 5  # type: ignore[attr-defined]
    assert ids.closed


async def test_an_async_iteration_stopped_early_is_no_error_and_closes_the_source(recorded: Recorded) -> None:
    ids = _Ids()
    iterator = ids.amemory_ids()
    assert await anext(iterator) == "m0"
    await iterator.aclose()  # type: ignore[attr-defined]
    span = _only_span(recorded)
    assert span.status.status_code is not StatusCode.ERROR  # type: ignore[attr-defined]
    assert span.attributes["chatmemory.items"] == 1  # type: ignore[attr-defined]
    assert ids.closed


async def test_an_async_iteration_that_fails_part_way_is_an_error_span(recorded: Recorded) -> None:
    ids = _Ids(fail_after=2)
    with pytest.raises(StoreError, match="the server went away"):
        [item async for item in ids.amemory_ids()]
    span = _only_span(recorded)
    assert span.status.status_code is StatusCode.ERROR  # type: ignore[attr-defined]
    assert span.attributes["chatmemory.items"] == 2  # type: ignore[attr-defined]
    assert ids.closed

"""The ``ttl`` argument every store takes: seconds, a timedelta or None."""

from __future__ import annotations

import datetime

import pytest

from chatmemory import InMemoryChatMemoryStore
from chatmemory.stores.base.options import ttl_seconds


@pytest.mark.parametrize(
    ("given", "seconds"),
    [
        (None, None),
        (2, 2.0),
        (0.5, 0.5),
        (datetime.timedelta(minutes=2), 120.0),
    ],
)
def test_accepted(given: float | datetime.timedelta | None, seconds: float | None) -> None:
    assert ttl_seconds(given) == seconds
    assert InMemoryChatMemoryStore(ttl=given).ttl == seconds


@pytest.mark.parametrize("given", [0, -1, 0.0, float("nan"), float("inf"), datetime.timedelta(0)])
def test_not_above_zero_is_a_value_error(given: float | datetime.timedelta) -> None:
    with pytest.raises(ValueError, match="ttl"):
        ttl_seconds(given)


@pytest.mark.parametrize("given", ["60", True, [1]])
def test_other_types_are_a_type_error(given: object) -> None:
    with pytest.raises(TypeError, match="ttl"):
        ttl_seconds(given)  # type: ignore[arg-type]

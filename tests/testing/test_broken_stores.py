"""The contract suite catches stores that break it: each broken store fails the cases naming its fault."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import pytest
from chatmemory.testing import ChatMemoryStoreContract
from support.broken_stores import {cls}

class TestBroken(ChatMemoryStoreContract):
    @pytest.fixture
    def store(self):
        return {cls}()

    @pytest.fixture
    def write_raw(self, store):
        return store.write_raw
"""


def _failed(pytester: pytest.Pytester, cls: str) -> tuple[set[str], int]:
    pytester.makepyfile(test_broken=SUITE.format(cls=cls))
    recorder = pytester.inline_run("-p", "no:cacheprovider", "-q")
    passed, _skipped, failed = recorder.listoutcomes()
    names = {report.nodeid.split("::")[-1].split("[")[0] for report in failed}
    return names, len(passed)


def test_a_correct_store_passes(pytester: pytest.Pytester) -> None:
    failed, passed = _failed(pytester, "RecordStore")
    assert failed == set()
    assert passed > 20


def test_empty_on_corruption_fails_the_corruption_cases(pytester: pytest.Pytester) -> None:
    failed, _ = _failed(pytester, "EmptyOnCorruptionStore")
    assert failed == {
        "test_corrupted_data_raises_naming_the_id",
        "test_corrupted_memory_is_not_overwritten_by_add",
        "test_newer_format_version_raises",
    }


def test_reordering_fails_the_round_trip_cases(pytester: pytest.Pytester) -> None:
    failed, _ = _failed(pytester, "ReorderingStore")
    assert {
        "test_round_trip_of_every_message_kind",
        "test_one_mebibyte_message",
        "test_sliding_window_of_1000_updates_leaves_the_last_window",
        "test_window_memory_over_300_turns_matches_the_reference",
    } <= failed
    assert "test_adversarial_ids_are_isolated" not in failed


def test_shared_state_fails_the_isolation_cases(pytester: pytest.Pytester) -> None:
    failed, _ = _failed(pytester, "SharedStateStore")
    assert {"test_adversarial_ids_are_isolated", "test_ids_differing_in_case_or_trailing_space_are_distinct"} <= failed
    assert "test_round_trip_of_every_message_kind" not in failed


def test_non_atomic_update_fails_the_atomicity_cases(pytester: pytest.Pytester) -> None:
    failed, _ = _failed(pytester, "NonAtomicStore")
    assert "test_failure_half_way_leaves_the_old_list" in failed
    assert "test_round_trip_of_every_message_kind" not in failed

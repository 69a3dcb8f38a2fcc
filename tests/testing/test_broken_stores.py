"""The contract suites catch stores that break them: each broken store fails the cases naming its fault.

Every check runs the sync suite (without any async plugin: it needs none) and the async suite (on
pytest-asyncio in its default strict mode, as a user's project might have it) over the same broken store.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SYNC_SUITE = """
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

ASYNC_SUITE = """
import pytest
from chatmemory.testing import AsyncChatMemoryStoreContract
from support.broken_stores import AsyncNonAtomicStore, AsyncOver, {cls}

class TestBroken(AsyncChatMemoryStoreContract):
    @pytest.fixture
    def store(self):
        made = {cls}()
        return made if isinstance(made, AsyncOver) else AsyncOver(made)

    @pytest.fixture
    def write_raw(self, store):
        return store.write_raw
"""


@pytest.fixture(params=["sync", "async"])
def suite(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _failed(pytester: pytest.Pytester, suite: str, cls: str) -> tuple[set[str], int]:
    source = SYNC_SUITE if suite == "sync" else ASYNC_SUITE
    pytester.makepyfile(test_broken=source.format(cls=cls))
    plugins = ["-p", "no:asyncio"] if suite == "sync" else ["-o", "asyncio_default_fixture_loop_scope=function"]
    recorder = pytester.inline_run("-p", "no:cacheprovider", *plugins, "-q")
    passed, _skipped, failed = recorder.listoutcomes()
    names = {report.nodeid.split("::")[-1].split("[")[0] for report in failed}
    return names, len(passed)


def test_a_correct_store_passes(pytester: pytest.Pytester, suite: str) -> None:
    failed, passed = _failed(pytester, suite, "RecordStore")
    assert failed == set()
    assert passed > 20


def test_empty_on_corruption_fails_the_corruption_cases(pytester: pytest.Pytester, suite: str) -> None:
    failed, _ = _failed(pytester, suite, "EmptyOnCorruptionStore")
    assert failed == {
        "test_corrupted_data_raises_naming_the_id",
        "test_corrupted_memory_is_not_overwritten_by_add",
        "test_newer_format_version_raises",
    }


def test_reordering_fails_the_round_trip_cases(pytester: pytest.Pytester, suite: str) -> None:
    failed, _ = _failed(pytester, suite, "ReorderingStore")
    assert {
        "test_round_trip_of_every_message_kind",
        "test_one_mebibyte_message",
        "test_sliding_window_of_1000_updates_leaves_the_last_window",
        "test_window_memory_over_300_turns_matches_the_reference",
    } <= failed
    assert "test_adversarial_ids_are_isolated" not in failed


def test_shared_state_fails_the_isolation_cases(pytester: pytest.Pytester, suite: str) -> None:
    failed, _ = _failed(pytester, suite, "SharedStateStore")
    assert {"test_adversarial_ids_are_isolated", "test_ids_differing_in_case_or_trailing_space_are_distinct"} <= failed
    assert "test_round_trip_of_every_message_kind" not in failed


def test_non_atomic_update_fails_the_atomicity_cases(pytester: pytest.Pytester, suite: str) -> None:
    failed, _ = _failed(pytester, suite, "NonAtomicStore")
    assert "test_failure_half_way_leaves_the_old_list" in failed
    assert "test_round_trip_of_every_message_kind" not in failed


def test_non_atomic_async_store_fails_the_reader_cases(pytester: pytest.Pytester) -> None:
    failed, _ = _failed(pytester, "async", "AsyncNonAtomicStore")
    assert {
        "test_failure_half_way_leaves_the_old_list",
        "test_readers_never_see_a_mix_of_two_lists",
        "test_readers_see_whole_windows_while_it_slides",
    } <= failed
    assert "test_round_trip_of_every_message_kind" not in failed

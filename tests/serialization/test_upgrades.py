"""Readers upgrade older format versions on read; writers write only the current one.

The real format has a single version so far, so these tests install made-up later versions (by patching
``FORMAT_VERSION`` and ``UPGRADERS`` in :mod:`chatmemory.serialization.upgrades`) and check the machinery
against them. The real format is never changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from chatmemory import CorruptedMemoryError, SystemMessage, UnsupportedFormatVersionError
from chatmemory.serialization import FORMAT_VERSION, dumps, dumps_message, loads, loads_message, upgrades

from .golden_messages import PAYLOADS, RECORDS

GOLDEN_V1 = Path(__file__).parent / "golden" / "v1"


class Recorder:
    """Made-up upgraders that tag system messages, so the order they ran in shows in the result."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def upgrader(self, version: int) -> Any:
        def upgrade(message: dict[str, Any]) -> dict[str, Any]:
            self.calls.append(version)
            if message["type"] == "system":  # a KeyError here on a broken message must become corruption
                return {**message, "text": f"{message['text']}|{version}->{version + 1}"}
            return message

        return upgrade


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """Pretend the current format is version 3, with upgraders 1->2 and 2->3."""
    recorder = Recorder()
    monkeypatch.setattr(upgrades, "FORMAT_VERSION", 3)
    monkeypatch.setattr(upgrades, "UPGRADERS", {1: recorder.upgrader(1), 2: recorder.upgrader(2)})
    return recorder


def test_every_older_version_has_an_upgrader() -> None:
    assert set(upgrades.UPGRADERS) == set(range(1, upgrades.FORMAT_VERSION))


def test_v1_payload_is_upgraded_through_every_version_in_order(recorder: Recorder) -> None:
    [system] = loads((GOLDEN_V1 / "system.json").read_bytes())
    assert system == SystemMessage("You are a helpful assistant.|1->2|2->3")
    assert recorder.calls == [1, 2]


def test_every_message_of_a_payload_is_upgraded(recorder: Recorder) -> None:
    conversation = loads((GOLDEN_V1 / "conversation.json").read_bytes())
    expected = PAYLOADS["conversation"]
    assert recorder.calls == [1, 2] * len(expected)
    assert conversation[0] == SystemMessage(f"{expected[0].text}|1->2|2->3")  # type: ignore[union-attr]
    assert conversation[1:] == expected[1:]


def test_v1_record_is_upgraded(recorder: Recorder) -> None:
    assert loads_message((GOLDEN_V1 / "record_system.json").read_bytes(), memory_id="m") == SystemMessage(
        f"{RECORDS['record_system'].text}|1->2|2->3"  # type: ignore[union-attr]
    )
    assert recorder.calls == [1, 2]


def test_a_middle_version_runs_only_the_later_upgraders(recorder: Recorder) -> None:
    payload = orjson.dumps({"version": 2, "messages": [{"type": "system", "text": "s"}]})
    assert loads(payload) == [SystemMessage("s|2->3")]
    assert loads_message(orjson.dumps({"v": 2, "type": "system", "text": "s"})) == SystemMessage("s|2->3")
    assert recorder.calls == [2, 2]


def test_writers_write_only_the_current_version_and_read_it_without_upgrading(recorder: Recorder) -> None:
    written = dumps([SystemMessage("s")])
    record = dumps_message(SystemMessage("s"))
    assert orjson.loads(written)["version"] == 3
    assert orjson.loads(record)["v"] == 3
    assert loads(written) == [SystemMessage("s")]
    assert loads_message(record) == SystemMessage("s")
    assert recorder.calls == []


def test_a_version_beyond_the_current_one_is_unsupported(recorder: Recorder) -> None:
    with pytest.raises(UnsupportedFormatVersionError, match="'m'") as caught:
        loads(orjson.dumps({"version": 4, "messages": []}), memory_id="m")
    assert (caught.value.version, caught.value.supported) == (4, 3)
    with pytest.raises(UnsupportedFormatVersionError):
        loads_message(orjson.dumps({"v": 4, "type": "system", "text": "s"}), memory_id="m")


def test_an_upgrader_tripping_over_a_broken_message_reports_corruption(recorder: Recorder) -> None:
    with pytest.raises(CorruptedMemoryError, match="'m'"):
        loads(orjson.dumps({"version": 1, "messages": [{"text": "no type"}]}), memory_id="m")
    with pytest.raises(CorruptedMemoryError, match="'m'"):
        loads_message(orjson.dumps({"v": 1, "type": "system"}), memory_id="m")


def test_the_real_format_is_untouched_after_the_fake_versions() -> None:
    assert upgrades.FORMAT_VERSION == FORMAT_VERSION
    assert orjson.loads(dumps([]))["version"] == FORMAT_VERSION

"""``chatmemory export``, ``import`` and ``copy`` on every backend."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from chatmemory import AiMessage, InMemoryChatMemoryStore, SystemMessage, UserMessage
from chatmemory.cli import main
from chatmemory.cli.transfer_commands import STORE_FAILURES_IN_A_ROW
from chatmemory.serialization import dumps_message, native
from chatmemory.testing.conversation import ADVERSARIAL_IDS, every_message_kind
from chatmemory.transfer import ExportedMemory, encode_line

IDS = ["user-1", *ADVERSARIAL_IDS[:12], "用户-七", "x" * 255]
SHORT = [SystemMessage("s"), UserMessage("u")]


def fill(store, ids=IDS) -> dict[str, list]:
    written = {}
    for index, memory_id in enumerate(ids):
        messages = every_message_kind() if index % 2 == 0 else [*SHORT, AiMessage(f"answer {index}")]
        store.update_messages(memory_id, messages)
        written[memory_id] = messages
    return written


def test_export_import_round_trip_is_lossless(stores, run, tmp_path: Path) -> None:
    source, target = stores.url("source"), stores.url("target")
    written = fill(stores[source])
    path = tmp_path / "memories.jsonl"
    exported = run("export", source, "-o", str(path))
    assert exported.status == 0, exported.err
    assert f"{len(IDS)} exported" in exported.err
    lines = path.read_bytes().splitlines()
    assert len(lines) == len(IDS)
    assert {orjson.loads(line)["id"] for line in lines} == set(IDS)
    imported = run("import", target, str(path))
    assert imported.status == 0, imported.err
    assert f"{len(IDS)} created" in imported.err
    for memory_id, messages in written.items():
        assert stores[target].get_messages(memory_id) == messages
    # Re-running changes nothing.
    again = run("import", target, str(path))
    assert again.status == 0
    assert f"{len(IDS)} unchanged" in again.err


def test_export_named_ids_and_prefix(stores, run, tmp_path: Path) -> None:
    source = stores.url("source")
    fill(stores[source], ["a-1", "a-2", "b-1"])
    named = tmp_path / "named.jsonl"
    assert run("export", source, "b-1", "a-2", "-o", str(named)).status == 0
    assert [orjson.loads(line)["id"] for line in named.read_bytes().splitlines()] == ["b-1", "a-2"]
    prefixed = tmp_path / "prefixed.jsonl"
    assert run("export", source, "--prefix", "a-", "-o", str(prefixed), "-q").status == 0
    assert [orjson.loads(line)["id"] for line in prefixed.read_bytes().splitlines()] == ["a-1", "a-2"]
    missing = run("export", source, "a-1", "nobody", "-o", str(named))
    assert missing.status == 1
    assert "no memory 'nobody'" in missing.err
    assert len(named.read_bytes().splitlines()) == 1


def test_export_reports_a_memory_that_does_not_decode_and_goes_on(stores, run, tmp_path: Path) -> None:
    source = stores.url("source")
    fill(stores[source], ["a", "c"])
    stores.backend.write_raw(stores[source], "b", [dumps_message(SHORT[0]), b"{broken"])
    path = tmp_path / "out.jsonl"
    result = run("export", source, "-o", str(path))
    assert result.status == 1
    assert "memory 'b' does not decode at the source and was skipped: " in result.err
    assert "not valid JSON" in result.err
    assert [orjson.loads(line)["id"] for line in path.read_bytes().splitlines()] == ["a", "c"]


def test_import_refuses_to_overwrite_unless_replace(stores, run, tmp_path: Path) -> None:
    source, target = stores.url("source"), stores.url("target")
    fill(stores[source], ["same", "other", "new"])
    path = tmp_path / "out.jsonl"
    assert run("export", source, "-o", str(path)).status == 0
    stores[target].update_messages("same", stores[source].get_messages("same"))
    stores[target].update_messages("other", [UserMessage("keep me")])
    refused = run("import", target, str(path))
    assert refused.status == 1
    assert "memory 'other' already exists with other messages" in refused.err
    assert "--replace" in refused.err
    assert "1 created, 1 unchanged, 1 failed" in refused.err
    assert stores[target].get_messages("other") == [UserMessage("keep me")]
    assert stores[target].get_messages("new") == stores[source].get_messages("new")
    replaced = run("import", target, str(path), "--replace")
    assert replaced.status == 0, replaced.err
    assert "1 replaced" in replaced.err
    assert stores[target].get_messages("other") == stores[source].get_messages("other")


def test_import_reports_bad_lines_by_number_and_strict_writes_nothing(stores, run, tmp_path: Path) -> None:
    target = stores.url("target")
    good = b'{"id": "good", "memory": ' + native.dumps([UserMessage("hi")]) + b"}"
    later = good.replace(b'"good"', b'"later"')
    path = tmp_path / "in.jsonl"
    path.write_bytes(
        b"\n".join(
            [
                good,
                b"{not json",
                b'{"id": "x"}',
                b'{"id": "", "memory": {"version": 1, "messages": []}}',
                b'{"id": "v", "memory": {"version": 99, "messages": []}}',
                b"",
                later,
            ]
        )
    )
    strict = run("import", target, str(path), "--strict")
    assert strict.status == 1
    assert "4 bad lines; nothing was written (--strict)" in strict.err
    assert stores[target].get_messages("good") == []
    result = run("import", target, str(path))
    assert result.status == 1
    reasons = [(2, "not valid JSON"), (3, "expected the keys"), (4, "invalid memory id"), (5, "version 99")]
    for number, reason in reasons:
        assert f"line {number}: " in result.err
        assert reason in result.err
    assert "2 created, 4 failed" in result.err
    assert stores[target].get_messages("later") == [UserMessage("hi")]


def test_copy_is_re_runnable_and_refuses_to_overwrite_unless_replace(stores, run) -> None:
    source, target = stores.url("source"), stores.url("target")
    written = fill(stores[source])
    first = run("copy", source, target)
    assert first.status == 0, first.err
    assert f"{len(IDS)} created" in first.err
    assert all(stores[target].get_messages(i) == m for i, m in written.items())
    second = run("copy", source, target)
    assert second.status == 0
    assert f"{len(IDS)} unchanged" in second.err
    stores[source].update_messages("user-1", SHORT)
    refused = run("copy", source, target)
    assert refused.status == 1
    assert "memory 'user-1' already exists with other messages" in refused.err
    replaced = run("copy", source, target, "--replace", "--ids", "user-1")
    assert replaced.status == 0
    assert "1 replaced" in replaced.err
    assert stores[target].get_messages("user-1") == SHORT
    missing = run("copy", source, target, "--id", "nobody")
    assert missing.status == 1
    assert "no memory 'nobody' in the source" in missing.err


def test_copy_and_export_between_this_backend_and_another(stores, run, tmp_path: Path) -> None:
    here = stores.url("here")
    elsewhere = stores.add("memory://elsewhere", InMemoryChatMemoryStore())
    written = fill(stores[here])
    assert run("copy", here, elsewhere).status == 0
    assert all(stores[elsewhere].get_messages(i) == m for i, m in written.items())
    back = stores.url("back")
    path = tmp_path / "from-memory.jsonl"
    assert run("export", elsewhere, "-o", str(path)).status == 0
    assert run("import", back, str(path)).status == 0
    assert all(stores[back].get_messages(i) == m for i, m in written.items())


def test_copy_reports_a_source_memory_that_does_not_decode(stores, run) -> None:
    source, target = stores.url("source"), stores.url("target")
    fill(stores[source], ["a"])
    stores.backend.write_raw(stores[source], "b", [b"{broken"])
    result = run("copy", source, target)
    assert result.status == 1
    assert "memory 'b' does not decode at the source and was skipped: not valid JSON" in result.err
    assert "1 created, 1 failed" in result.err


def test_import_reports_deeply_nested_lines_by_number_and_goes_on(stores, run, tmp_path: Path) -> None:
    target = stores.url("target")
    good = b'{"id": "good", "memory": ' + native.dumps([UserMessage("hi")]) + b"}"
    later = good.replace(b'"good"', b'"later"')

    def nested(depth: int) -> bytes:
        inner = depth - 4
        return b'{"id": "deep", "memory": {"version": 1, "messages": [{"x": ' + b"[" * inner + b"]" * inner + b"}]}}"

    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join([good, nested(256), nested(700), nested(1023), nested(5000), later]))
    strict = run("import", target, str(path), "--strict")
    assert strict.status == 1
    assert "4 bad lines; nothing was written (--strict)" in strict.err
    assert stores[target].get_messages("good") == []
    result = run("import", target, str(path))
    assert result.status == 1
    for number in (2, 3, 4, 5):
        assert f"line {number}: " in result.err
    assert "Traceback" not in result.err
    assert "2 created, 4 failed" in result.err
    assert stores[target].get_messages("later") == [UserMessage("hi")]


def _refused_size(stores) -> int:
    """Bytes of a message the backend's server refuses in one memory (skip where no bounded size is refused)."""
    name = stores.backend.name
    if name == "mongodb":
        return 17 << 20  # past the 16 MiB document limit
    if name == "mysql":
        store = stores[stores.url("probe")]
        with store.engine.connect() as connection:
            packet = int(connection.exec_driver_sql("SELECT @@max_allowed_packet").scalar_one())
        if packet > 32 << 20:
            pytest.skip(f"max_allowed_packet is {packet} bytes: a memory it refuses is too large for a test")
        return packet + (1 << 20)
    pytest.skip(f"{name} refuses no memory of a size a test can write")


def test_import_goes_on_after_a_memory_the_store_refuses(stores, run, tmp_path: Path) -> None:
    target = stores.url("target")
    huge = ExportedMemory("huge", [UserMessage("x" * _refused_size(stores))], None)
    memories = [ExportedMemory(f"m{index}", [UserMessage(f"hello {index}")], None) for index in range(4)]
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(encode_line(m) + b"\n" for m in [memories[0], memories[1], huge, *memories[2:]]))
    result = run("import", target, str(path))
    assert result.status == 1
    refused = [line for line in result.err.splitlines() if "huge" in line]
    assert len(refused) == 1, result.err
    assert refused[0].startswith("chatmemory import: line 3: memory 'huge' was not written: ")
    assert result.err.strip().splitlines()[-1] == "chatmemory import: 4 created, 1 failed"
    for memory in memories:
        assert stores[target].get_messages(memory.memory_id) == memory.messages
    assert stores[target].get_messages("huge") == []
    # The same for a copy, naming the memory.
    source = stores.add("memory://source", InMemoryChatMemoryStore())
    for memory in [huge, *memories]:
        stores[source].update_messages(memory.memory_id, memory.messages)
    elsewhere = stores.url("elsewhere")
    copied = run("copy", source, elsewhere)
    assert copied.status == 1
    assert "chatmemory copy: memory 'huge' was not written: " in copied.err
    assert "4 created, 1 failed" in copied.err
    assert all(stores[elsewhere].get_messages(m.memory_id) == m.messages for m in memories)


def test_import_stops_when_the_store_fails_on_memory_after_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    closed = InMemoryChatMemoryStore()
    closed.close()  # every call now fails with a StoreError, as a store that went down does

    @contextlib.contextmanager
    def opener(url: str, options: object) -> Iterator[InMemoryChatMemoryStore]:
        yield closed

    memories = [ExportedMemory(f"m{index}", [UserMessage("hi")], None) for index in range(STORE_FAILURES_IN_A_ROW + 3)]
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(encode_line(m) + b"\n" for m in memories))
    status = main(["import", "memory://", str(path)], open_store=opener)
    err = capsys.readouterr().err
    assert status == 1
    assert err.count("was not written") == STORE_FAILURES_IN_A_ROW
    assert f"the store failed on {STORE_FAILURES_IN_A_ROW} memories in a row; stopping with 3 not tried" in err
    assert f"3 not tried, {STORE_FAILURES_IN_A_ROW} failed" in err

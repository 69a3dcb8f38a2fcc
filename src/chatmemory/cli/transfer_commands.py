"""``chatmemory export``, ``import`` and ``copy``: move memories between stores, losslessly and re-runnably.

The rules live in :mod:`chatmemory.transfer`; these commands open the stores, loop with a progress bar,
report each failed item with what is wrong, and exit 1 when any failed.
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import click

from chatmemory import telemetry
from chatmemory.cli.app import cli, namespace_flags, opened_store, quiet_flag, reports_failures
from chatmemory.cli.console import EXIT_FAILED, EXIT_OK, Reporter, Tally
from chatmemory.cli.stores import (
    NAMESPACE_OPTIONS,
    UNSEALED_KINDS,
    load_keyring,
    namespace_options,
    store_kind,
    url_for_display,
)
from chatmemory.core.errors import ChatMemoryError, CorruptedMemoryError, StoreError
from chatmemory.core.store import ChatMemoryStore, validate_memory_id
from chatmemory.memory_times import SupportsExpiryAt
from chatmemory.stored_memories import SupportsBatchCreates, SupportsBatchReads
from chatmemory.transfer import (
    NOT_READ,
    BadExportLineError,
    Destination,
    ExportedMemory,
    HistoryNotKeptError,
    LangChain4jRedisSource,
    MemorySource,
    Prefetched,
    StoreSource,
    WriteOutcome,
    check_restores_history,
    decode_line,
    encode_line,
    new_memory,
    settled,
    write_memory,
    write_memory_with_history,
)

__all__ = ["copy", "export", "import_"]


class _NoSuchMemoryError(ChatMemoryError):
    """A memory named on the command line is not in the source."""

    def __init__(self, memory_id: str) -> None:
        super().__init__(f"no memory {memory_id!r} in the source")


def _unreadable(exc: ChatMemoryError) -> ChatMemoryError:
    """The error to report for a memory that does not decode at the source (it is skipped, not repaired)."""
    if isinstance(exc, CorruptedMemoryError):
        return _SkippedMemoryError(
            f"memory {exc.memory_id!r} does not decode at the source and was skipped: {exc.reason}"
        )
    return exc


class _SkippedMemoryError(ChatMemoryError):
    """A memory left out of an export or a copy."""


def _ids(values: tuple[str, ...]) -> list[str]:
    try:
        return [validate_memory_id(value) for value in values]
    except (TypeError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint="ID") from exc


def _selected(source: MemorySource, ids: list[str]) -> list[str]:
    return ids if ids else sorted(source.memory_ids())


def _read_in_batches(
    source: MemorySource, memory_ids: Iterator[str]
) -> Iterator[tuple[str, ExportedMemory | ChatMemoryError | None]]:
    """Each id with its memory (``None``: absent), or the error of one that does not decode at the source.

    A store source is read :data:`WRITE_BATCH` memories at a time (one round trip each where the store
    reads batches); any other source one memory at a time. A failing store raises (``StoreError``).
    """
    if isinstance(source, StoreSource):
        while chunk := list(itertools.islice(memory_ids, WRITE_BATCH)):
            yield from zip(chunk, source.read_many(chunk), strict=True)
        return
    for memory_id in memory_ids:
        try:
            memory: ExportedMemory | ChatMemoryError | None = source.read(memory_id)
        except StoreError:
            raise
        except ChatMemoryError as exc:
            memory = exc
        yield memory_id, memory


@contextlib.contextmanager
def _output(path: str) -> Iterator[IO[bytes]]:
    """``path`` opened for writing, replaced only when the export finishes (``-``: stdout)."""
    if path == "-":
        yield sys.stdout.buffer
        sys.stdout.flush()
        return
    target = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or Path("."))
    try:
        with os.fdopen(handle, "wb") as stream:
            yield stream
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def _history_option(help_text: str) -> Callable[[Any], Any]:
    option: Callable[[Any], Any] = click.option("--history", "with_history", is_flag=True, help=help_text)
    return option


def _ttl_option(function: Any) -> Any:
    return click.option(
        "--ttl",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="SECONDS",
        help="Open the destination with this ttl (as your application does); memories written expire by it.",
    )(function)


@cli.command()
@click.argument("url")
@click.argument("ids", nargs=-1, metavar="[ID]...")
@click.option("-o", "--output", required=True, metavar="FILE", help="The .jsonl file to write ('-': stdout).")
@click.option("--prefix", default="", metavar="P", help="Without IDs: only memories whose id starts with P.")
@_history_option("Write each memory's history too (every entry: sequence, written_at, message).")
@namespace_flags()
@quiet_flag
@reports_failures("export")
def export(
    url: str,
    ids: tuple[str, ...],
    output: str,
    prefix: str,
    with_history: bool,
    quiet: bool,
    **namespace: str | None,
) -> int:
    """Write memories (all, or the IDs given) to a file, one per line in the native format with its expiry.

    With --history each line carries the memory's history too; the store must keep one.
    """
    reporter = Reporter("export", quiet=quiet)
    if output == "-":
        reporter.show_progress = False  # the lines go to the terminal: a bar would tear through them
    tally = Tally()
    written = 0
    options = namespace_options(url, namespace) | ({"history": True} if with_history else {})
    with opened_store(url, options) as store:
        source = StoreSource(store, id_prefix=prefix, history=with_history)
        selected = _selected(source, _ids(ids))
        with telemetry.operation(backend=store_kind(url), name="cli.export") as op, _output(output) as stream:
            for memory_id, memory in _read_in_batches(source, reporter.track(selected, "exporting", len(selected))):
                if isinstance(memory, ChatMemoryError):
                    reporter.error(str(_unreadable(memory)))
                    tally.counts["failed"] += 1
                    continue
                if memory is None:
                    reporter.error(f"no memory {memory_id!r}")
                    tally.counts["failed"] += 1
                    continue
                line = encode_line(memory)
                stream.write(line + b"\n")
                tally.counts["exported"] += 1
                written += len(line) + 1
            op.record(items=tally.counts["exported"], failed=tally.failed, bytes=written)
    reporter.info(f"{tally.summary()} ({output})")
    return EXIT_FAILED if tally.failed else EXIT_OK


def _read_lines(path: str) -> list[bytes]:
    if path == "-":
        return sys.stdin.buffer.read().splitlines()
    try:
        return Path(path).read_bytes().splitlines()
    except OSError as exc:
        raise click.BadParameter(str(exc), param_hint="FILE") from exc


STORE_FAILURES_IN_A_ROW = 5
"""After this many memories in a row failed in the destination store, ``import`` and ``copy`` stop: a store
that refuses one memory (too large for it) is not down, one that fails on every memory is."""

Numbered = tuple[int | None, ExportedMemory | ChatMemoryError]
"""An item to write with the number of the export line it came from (``None`` for a copy)."""


def _where(line_number: int | None) -> str:
    return "" if line_number is None else f"line {line_number}: "


WRITE_BATCH = 200
"""Memories ``import`` and ``copy`` read from the destination in one batch, where it reads batches."""


def _with_stored(
    store: ChatMemoryStore, memories: Iterator[Numbered]
) -> Iterator[tuple[int | None, ExportedMemory | ChatMemoryError, Prefetched | WriteOutcome]]:
    """Each item with the destination's memory as one batch read of :data:`WRITE_BATCH` items found it.

    Where the store creates batches, the memories the read found absent are created together, and come
    with their outcome (``CREATED``). A store without batch reads, or a batch read that fails, gives
    :data:`~chatmemory.transfer.NOT_READ`, and a batch create that fails leaves its memories to their own
    writes: each memory is then read (and written) by its own write, which reports its own failure.
    """
    if not isinstance(store, SupportsBatchReads):
        for line_number, item in memories:
            yield line_number, item, NOT_READ
        return
    destination = Destination.of(store)
    while chunk := list(itertools.islice(memories, WRITE_BATCH)):
        ids = [item.memory_id for _, item in chunk if isinstance(item, ExportedMemory)]
        found: dict[str, Prefetched] = {}
        if ids:
            with contextlib.suppress(ChatMemoryError):  # each write then reads (and reports) its own
                found = dict(zip(ids, store.read_batch(ids), strict=True))
        now = datetime.datetime.now(datetime.timezone.utc)
        priors: list[Prefetched | WriteOutcome] = []
        for _, item in chunk:
            stored = found.get(item.memory_id, NOT_READ) if isinstance(item, ExportedMemory) else NOT_READ
            # Found as exported: unchanged, with nothing more to send (a history to restore always goes on).
            done = (
                settled(destination, item, stored, now)
                if isinstance(item, ExportedMemory) and item.history is None
                else None
            )
            priors.append(stored if done is None else done)
        if isinstance(store, SupportsBatchCreates):
            _create_absent(store, destination, chunk, priors, now)
        for (line_number, item), prior in zip(chunk, priors, strict=True):
            yield line_number, item, prior


def _create_absent(
    store: SupportsBatchCreates,
    destination: Destination,
    chunk: list[Numbered],
    priors: list[Prefetched | WriteOutcome],
    now: datetime.datetime,
) -> None:
    """Create the memories of ``chunk`` a batch read found absent, together; mark those created ``CREATED``."""
    creates = [
        (index, made)
        for index, ((_, item), prior) in enumerate(zip(chunk, priors, strict=True))
        if isinstance(item, ExportedMemory)
        and item.history is None  # created together with its history, in one step of its own
        and not isinstance(prior, WriteOutcome)
        and (made := new_memory(destination, item, prior, now)) is not None
    ]
    if not creates:
        return
    try:
        versions = store.create_batch([made for _, made in creates])
    except ChatMemoryError:
        return  # each memory goes its own way: one created before the failure is found there and settled
    for (index, _), version in zip(creates, versions, strict=True):
        if version is not None:
            priors[index] = WriteOutcome.CREATED


def _write_all(
    store: ChatMemoryStore,
    memories: Iterator[Numbered],
    total: int,
    *,
    replace: bool,
    reporter: Reporter,
    tally: Tally,
    verb: str,
    ttl_given: bool,
) -> None:
    """Write each memory, reporting each failure and counting outcomes in ``tally``.

    A memory the destination refuses (a ``StoreError`` for that memory) is reported with its line and id
    and the others are still written; after :data:`STORE_FAILURES_IN_A_ROW` such failures in a row the
    store is taken to be failing and the rest are counted ``not tried``.
    """
    expiry_dropped = False
    store_failures = done = 0
    with reporter.progress(verb, total) as bar:
        for line_number, item, prior in _with_stored(store, memories):
            bar.advance()
            done += 1
            if isinstance(item, ChatMemoryError):  # a bad line, or a memory that does not decode at the source
                reporter.error(str(item))
                tally.counts["failed"] += 1
                continue
            try:
                if isinstance(prior, WriteOutcome):  # created with its batch
                    outcome = prior
                elif item.history is not None:
                    outcome = write_memory_with_history(store, item, replace=replace, stored=prior)
                else:
                    outcome = write_memory(store, item, replace=replace, stored=prior)
            except HistoryNotKeptError:  # the destination cannot take any history: no point going on
                raise
            except StoreError as exc:  # the destination refused or failed this memory: the next may do
                reporter.error(f"{_where(line_number)}memory {item.memory_id!r} was not written: {exc}")
                tally.counts["failed"] += 1
                store_failures += 1
                if store_failures >= STORE_FAILURES_IN_A_ROW:
                    left = total - done
                    reporter.error(
                        f"the store failed on {store_failures} memories in a row; stopping with {left} not tried. "
                        "Fix the store and run the command again: memories written are left as they are"
                    )
                    tally.counts["not tried"] += left
                    break
                continue
            except ChatMemoryError as exc:  # exists (no --replace), kept changing, or does not encode
                reporter.error(f"{_where(line_number)}{exc}")
                tally.counts["failed"] += 1
                store_failures = 0
                continue
            store_failures = 0
            tally.counts[outcome.value] += 1
            expiry_dropped = expiry_dropped or (
                isinstance(item.expires_at, datetime.datetime) and not isinstance(store, SupportsExpiryAt)
            )
    if expiry_dropped and not ttl_given:
        reporter.info(
            "expiry times were not kept: the destination cannot set one memory's expiry (it lacks "
            "chatmemory.memory_times.SupportsExpiryAt); pass --ttl SECONDS so that memories written expire as "
            "your application's do"
        )


@cli.command(name="import")
@click.argument("url")
@click.argument("file", metavar="FILE.jsonl")
@click.option("--replace", is_flag=True, help="Overwrite memories that exist with other messages.")
@click.option("--strict", is_flag=True, help="Check every line first; write nothing if any line is bad.")
@_ttl_option
@namespace_flags()
@quiet_flag
@reports_failures("import")
def import_(
    url: str, file: str, replace: bool, strict: bool, ttl: float | None, quiet: bool, **namespace: str | None
) -> int:
    """Write the memories of an export file into a store, each atomically.

    A memory that exists with the same messages is left alone; with other messages it is refused unless
    --replace. A bad line is reported by number and skipped (with --strict: nothing is written). A line
    that carries a history (export --history) has it restored: the store is opened with history.
    """
    reporter = Reporter("import", quiet=quiet)
    tally = Tally()
    lines = [(number, line) for number, line in enumerate(_read_lines(file), start=1) if line.strip()]

    def decoded() -> Iterator[Numbered]:
        for number, line in lines:
            try:
                yield number, decode_line(line, number)
            except BadExportLineError as exc:  # noqa: PERF203 - a bad line is reported and skipped
                yield number, exc

    checked: list[Numbered] = []
    if strict:
        checked = list(decoded())
        bad = [item for _, item in checked if isinstance(item, BadExportLineError)]
        if bad:
            for error in bad:
                reporter.error(str(error))
            lines_word = "line" if len(bad) == 1 else "lines"
            reporter.error(f"{len(bad)} bad {lines_word}; nothing was written (--strict)")
            return EXIT_FAILED
        items: Iterator[Numbered] = iter(checked)
    else:
        items = decoded()
    options = namespace_options(url, namespace) | ({"ttl": ttl} if ttl is not None else {})
    # A quick look for lines that may carry a history (each line still decides when it is decoded).
    carries_history = any(b'"history":' in line for _, line in lines)
    if carries_history:
        options["history"] = True
    with opened_store(url, options) as store, telemetry.operation(backend=store_kind(url), name="cli.import") as op:
        if strict and any(isinstance(item, ExportedMemory) and item.history is not None for _, item in checked):
            check_restores_history(store)  # before anything is written (else at the first such line)
        _write_all(
            store,
            items,
            len(lines),
            replace=replace,
            reporter=reporter,
            tally=tally,
            verb="importing",
            ttl_given=ttl is not None,
        )
        op.record(items=len(lines), failed=tally.failed)
    reporter.info(tally.summary())
    return EXIT_FAILED if tally.failed else EXIT_OK


def _split_namespace(
    source_kind: str, target_kind: str, given: Mapping[str, str | None]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Namespace options per side: ``--src-X``/``--dst-X`` as given, and ``--X`` on the one side it fits."""
    source: dict[str, Any] = {}
    target: dict[str, Any] = {}
    for name in ("key_prefix", "table_prefix", "database", "collection"):
        flag = "--" + name.replace("_", "-")
        common, on_source, on_target = given.get(name), given.get(f"src_{name}"), given.get(f"dst_{name}")
        for side, kind, value, into in (
            ("src", source_kind, on_source, source),
            ("dst", target_kind, on_target, target),
        ):
            if value is not None:
                if name not in NAMESPACE_OPTIONS[kind]:
                    raise click.UsageError(f"--{side}-{flag[2:]} does not apply to the {side} store (a {kind} store)")
                into[name] = value
        if common is None:
            continue
        fits = [
            into for kind, into in ((source_kind, source), (target_kind, target)) if name in NAMESPACE_OPTIONS[kind]
        ]
        if not fits:
            raise click.UsageError(f"{flag} applies to neither store ({source_kind} → {target_kind})")
        if len(fits) == 2:
            raise click.UsageError(f"{flag} fits both stores; say which: --src-{flag[2:]} / --dst-{flag[2:]}")
        if name in fits[0]:
            raise click.UsageError(f"{flag} and --src-/--dst-{flag[2:]} name the same store")
        fits[0][name] = common
    for side, kind, into in (("src", source_kind, source), ("dst", target_kind, target)):
        value = given.get(f"{side}_keyring") or given.get("keyring")
        if value is None:
            continue
        if kind in UNSEALED_KINDS:
            if given.get(f"{side}_keyring") is not None:
                raise click.UsageError(f"--{side}-keyring does not apply to the {side} store (a {kind} store)")
            continue
        into["encryption"] = load_keyring(value)
    return source, target


@cli.command()
@click.argument("source_url", metavar="SRC_URL")
@click.argument("target_url", metavar="DST_URL")
@click.option("--ids", "--id", "ids", multiple=True, metavar="ID", help="Copy only this memory (repeatable).")
@click.option("--prefix", default="", metavar="P", help="Without --ids: only memories whose id starts with P.")
@click.option(
    "--from",
    "layout",
    type=click.Choice(["chatmemory", "langchain4j-redis"]),
    default="chatmemory",
    show_default=True,
    help="How the source keeps memories: a chatmemory store, or LangChain4j's Redis store "
    "(one JSON string per key, key = key prefix + memory id).",
)
@click.option("--replace", is_flag=True, help="Overwrite destination memories that hold other messages.")
@_history_option("Carry each memory's history too (both stores are opened with history).")
@_ttl_option
@namespace_flags(describe="the store the option fits")
@namespace_flags("src", describe="the source store")
@namespace_flags("dst", describe="the destination store")
@quiet_flag
@reports_failures("copy")
def copy(
    source_url: str,
    target_url: str,
    ids: tuple[str, ...],
    prefix: str,
    layout: str,
    replace: bool,
    with_history: bool,
    ttl: float | None,
    quiet: bool,
    **namespace: str | None,
) -> int:
    """Copy memories from one store to another; re-runnable (equal memories are skipped).

    Key, table and database options apply to the side whose kind they fit; when both sides are of one
    kind, use the --src-/--dst- forms. With --history each memory's history goes too.
    """
    reporter = Reporter("copy", quiet=quiet)
    tally = Tally()
    source_kind, target_kind = store_kind(source_url), store_kind(target_url)
    if layout == "langchain4j-redis" and source_kind != "redis":
        raise click.UsageError(f"--from langchain4j-redis needs a Redis source URL, not {url_for_display(source_url)}")
    if with_history and layout == "langchain4j-redis":
        raise click.UsageError("--history needs a chatmemory source: LangChain4j's Redis store keeps no history")
    source_options, target_options = _split_namespace(source_kind, target_kind, namespace)
    if with_history:
        source_options["history"] = target_options["history"] = True
    if ttl is not None:
        target_options["ttl"] = ttl
    with contextlib.ExitStack() as stack:
        source: MemorySource
        if layout == "langchain4j-redis":
            legacy = LangChain4jRedisSource(source_url, key_prefix=source_options.get("key_prefix", ""))
            stack.callback(legacy.close)
            source = legacy
        else:
            source = StoreSource(
                stack.enter_context(opened_store(source_url, source_options)), id_prefix=prefix, history=with_history
            )
        target = stack.enter_context(opened_store(target_url, target_options))
        if with_history:
            check_restores_history(target)
        selected = [memory_id for memory_id in _selected(source, _ids(ids)) if memory_id.startswith(prefix)]

        def read_all() -> Iterator[Numbered]:
            for memory_id, memory in _read_in_batches(source, iter(selected)):
                if isinstance(memory, ChatMemoryError):  # does not decode at the source: report, go on
                    yield None, _unreadable(memory)
                    continue
                if memory is not None:
                    yield None, memory
                elif ids:
                    yield None, _NoSuchMemoryError(memory_id)
                else:
                    tally.counts["gone since listed"] += 1

        with telemetry.operation(backend=f"{source_kind}->{target_kind}", name="cli.copy") as op:
            _write_all(
                target,
                read_all(),
                len(selected),
                replace=replace,
                reporter=reporter,
                tally=tally,
                verb="copying",
                ttl_given=ttl is not None,
            )
            op.record(items=len(selected), failed=tally.failed)
    reporter.info(tally.summary())
    return EXIT_FAILED if tally.failed else EXIT_OK

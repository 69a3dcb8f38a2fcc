"""``chatmemory ls``, ``show`` and ``stats``: look at memories without changing them."""

from __future__ import annotations

import base64
import datetime
from collections import Counter
from typing import Any

import click
import orjson
from rich.table import Table
from rich.text import Text

from chatmemory import telemetry
from chatmemory.cli.app import cli, namespace_flags, opened_store, quiet_flag, reports_failures
from chatmemory.cli.console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Reporter, stdout_console
from chatmemory.cli.stores import namespace_options, store_kind
from chatmemory.core.errors import SerializationError
from chatmemory.core.store import (
    ChatMemoryStore,
    SupportsExpiryPurge,
    SupportsListing,
    SupportsRawRecords,
    SupportsSchema,
    SupportsTTL,
    SupportsVersioning,
    validate_memory_id,
)
from chatmemory.inspection import SUMMARY_BATCH, MemorySummary, read_raw_records, summarize_many
from chatmemory.memory_times import SupportsExpiryAt, SupportsMemoryTimes
from chatmemory.transfer import StoreSource

__all__ = ["ls", "show", "stats"]

_NOT_TOLD = "this store does not report write and expiry times (it lacks chatmemory.memory_times.SupportsMemoryTimes)"


def _time(value: datetime.datetime | None) -> str | None:
    return None if value is None else value.astimezone(datetime.timezone.utc).isoformat(timespec="seconds")


def _summary_json(summary: MemorySummary) -> dict[str, Any]:
    return {
        "id": summary.memory_id,
        "messages": summary.messages,
        "bytes": summary.size,
        "last_write": _time(summary.last_write),
        "expires_at": _time(summary.expires_at),
        "times_known": summary.times_known,
        "error": summary.error,
    }


def _memory_id(value: str) -> str:
    try:
        return validate_memory_id(value)
    except (TypeError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint="ID") from exc


def _summaries(store: ChatMemoryStore, ids: list[str], reporter: Reporter, *, roles: bool) -> list[MemorySummary]:
    found: list[MemorySummary] = []
    with reporter.progress("reading", len(ids)) as bar:
        done = 0
        for _, summary in summarize_many(store, ids, roles=roles):  # a batch per round trip where the store has them
            done += 1
            if done == SUMMARY_BATCH:  # the bar moves a batch at a time, as the reads come
                bar.advance(done)
                done = 0
            if summary is not None:  # gone since it was listed
                found.append(summary)
        bar.advance(done)
    return found


@cli.command()
@click.argument("url")
@click.option("--prefix", default="", metavar="P", help="Only memories whose id starts with P.")
@click.option("--json", "as_json", is_flag=True, help="A JSON array instead of a table.")
@namespace_flags()
@quiet_flag
@reports_failures("ls")
def ls(url: str, prefix: str, as_json: bool, quiet: bool, **namespace: str | None) -> int:
    """List memories: ids, message counts, sizes, last write and expiry.

    Exit status 1 when some memories do not decode (they are listed with the reason).
    """
    reporter = Reporter("ls", quiet=quiet)
    with opened_store(url, namespace_options(url, namespace)) as store:
        if not isinstance(store, SupportsListing):
            reporter.error(f"{type(store).__name__} cannot list its memories")
            return EXIT_USAGE
        with telemetry.operation(backend=store_kind(url), name="cli.ls") as op:
            ids = sorted(StoreSource(store, id_prefix=prefix).memory_ids())
            summaries = _summaries(store, ids, reporter, roles=False)  # ls shows no roles
            op.record(items=len(summaries))
        broken = [summary for summary in summaries if summary.error is not None]
        if as_json:
            click.echo(orjson.dumps([_summary_json(s) for s in summaries], option=orjson.OPT_INDENT_2).decode())
        else:
            table = Table("id", "messages", "bytes", "last write", "expires", "status", box=None, header_style="bold")
            for summary in summaries:
                if summary.times_known:
                    written, expires = _time(summary.last_write) or "?", _time(summary.expires_at) or "never"
                else:
                    written = expires = "?"
                table.add_row(
                    Text(summary.memory_id),
                    str(summary.messages),
                    "?" if summary.size is None else str(summary.size),
                    written,
                    expires,
                    Text("ok" if summary.error is None else f"does not decode: {summary.error}"),
                )
            stdout_console().print(table)
            if summaries and not isinstance(store, SupportsMemoryTimes):
                reporter.info(f"last write and expiry '?': {_NOT_TOLD}")
        reporter.info(f"{len(summaries)} memories" + (f", {len(broken)} do not decode" if broken else ""))
        return EXIT_FAILED if broken else EXIT_OK


def _raw(store: ChatMemoryStore, memory_id: str, reporter: Reporter) -> int:
    if not isinstance(store, SupportsRawRecords):
        reporter.error(
            f"{type(store).__name__} does not show its stored records yet (it lacks read_raw, "
            "chatmemory.SupportsRawRecords); use --format native to see the decoded messages"
        )
        return EXIT_USAGE
    records = read_raw_records(store, memory_id)
    rows: list[dict[str, Any]] = []
    for record in records:
        try:
            text, encoding = record.data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            text, encoding = base64.b64encode(record.data).decode("ascii"), "base64"
        rows.append(
            {
                "position": record.position,
                "bytes": len(record.data),
                "encoding": encoding,
                "record": text,
                "error": record.error,
            }
        )
    click.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
    bad = [record for record in records if record.error is not None]
    if bad:
        where = "; ".join(f"position {record.position}: {record.error}" for record in bad)
        reporter.info(f"{len(bad)} of {len(records)} records of {memory_id!r} do not decode: {where}")
    elif not records:
        reporter.info(f"no stored records for {memory_id!r}")
    return EXIT_OK


def _json_of(messages: list[Any], form: str) -> bytes:
    from chatmemory.serialization import langchain4j, native, to_openai

    if form == "native":
        document = orjson.loads(native.dumps(messages))
    elif form == "openai":
        document = to_openai(messages)
    else:
        document = orjson.loads(langchain4j.dumps(messages))
    return orjson.dumps(document, option=orjson.OPT_INDENT_2)


@cli.command()
@click.argument("url")
@click.argument("memory_id", metavar="ID")
@click.option(
    "--format",
    "form",
    type=click.Choice(["table", "native", "openai", "langchain4j", "raw"]),
    default="table",
    show_default=True,
    help="A table like the demo's, JSON in a format, or the stored records (raw), even ones that do not decode.",
)
@namespace_flags()
@reports_failures("show")
def show(url: str, memory_id: str, form: str, **namespace: str | None) -> int:
    """Show one memory's window."""
    from chatmemory.demo import describe_message

    reporter = Reporter("show", quiet=False)
    memory_id = _memory_id(memory_id)
    with opened_store(url, namespace_options(url, namespace)) as store:
        if form == "raw":
            return _raw(store, memory_id, reporter)
        try:
            if isinstance(store, SupportsVersioning):
                snapshot = store.load(memory_id)
                messages, exists = snapshot.messages, snapshot.version != 0
            else:
                messages = store.get_messages(memory_id)
                exists = bool(messages)
        except SerializationError as exc:
            reporter.error(f"{exc}. See the stored records: chatmemory show URL {memory_id!r} --format raw")
            return EXIT_FAILED
        if not exists:
            reporter.error(f"no memory {memory_id!r} in this store")
            return EXIT_FAILED
        if form != "table":
            click.echo(_json_of(messages, form).decode())
            return EXIT_OK
        table = Table("#", "role", "content", box=None, header_style="bold", title_justify="left")
        table.title = f"memory {memory_id!r}: {len(messages)} messages"
        for index, message in enumerate(messages):
            role, text = describe_message(message, 2000)
            table.add_row(str(index), role, Text(text))
        stdout_console().print(table)
        return EXIT_OK


def _capabilities(store: ChatMemoryStore) -> list[str]:
    protocols = [
        SupportsVersioning,
        SupportsListing,
        SupportsTTL,
        SupportsSchema,
        SupportsRawRecords,
        SupportsExpiryPurge,
        SupportsMemoryTimes,
        SupportsExpiryAt,
    ]
    return [protocol.__name__ for protocol in protocols if isinstance(store, protocol)]


@cli.command()
@click.argument("url")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of lines of text.")
@namespace_flags()
@quiet_flag
@reports_failures("stats")
def stats(url: str, as_json: bool, quiet: bool, **namespace: str | None) -> int:
    """Count memories, messages and bytes; messages per role; what the store supports."""
    reporter = Reporter("stats", quiet=quiet)
    with opened_store(url, namespace_options(url, namespace)) as store:
        if not isinstance(store, SupportsListing):
            reporter.error(f"{type(store).__name__} cannot list its memories")
            return EXIT_USAGE
        with telemetry.operation(backend=store_kind(url), name="cli.stats") as op:
            summaries = _summaries(store, sorted(store.memory_ids()), reporter, roles=True)
            op.record(items=len(summaries))
        roles: Counter[str] = Counter()
        for summary in summaries:
            roles.update(summary.roles)
        sizes = [s.size for s in summaries if s.size is not None]
        figures: dict[str, Any] = {
            "store": repr(store),
            "capabilities": _capabilities(store),
            "schema_revision": store.schema_revision() if isinstance(store, SupportsSchema) else None,
            "memories": len(summaries),
            "messages": sum(s.messages for s in summaries),
            "bytes": sum(sizes),
            "largest_memory_bytes": max(sizes, default=0),
            "messages_per_role": dict(sorted(roles.items())),
            "not_decoding": sorted(s.memory_id for s in summaries if s.error is not None),
        }
        if as_json:
            click.echo(orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode())
        else:
            for name, value in figures.items():
                shown = ", ".join(value) if isinstance(value, list) else value
                if isinstance(value, dict):
                    shown = ", ".join(f"{role} {count}" for role, count in value.items()) or "none"
                click.echo(f"{name.replace('_', ' ')}: {shown if shown not in ('', None) else '-'}")
        return EXIT_FAILED if figures["not_decoding"] else EXIT_OK

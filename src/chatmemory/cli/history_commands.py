"""``chatmemory history`` and ``chatmemory trim-history``: read and bound the history stores keep beside windows.

Both open the store with ``history=True`` (see :mod:`chatmemory.core.history`); a store that keeps no
history for that namespace simply has none to show.
"""

from __future__ import annotations

import datetime
import re
import sys
from typing import Any

import click
import orjson
from rich.table import Table
from rich.text import Text

from chatmemory import telemetry
from chatmemory.cli.app import cli, namespace_flags, opened_store, quiet_flag, reports_failures
from chatmemory.cli.console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Reporter, stdout_console
from chatmemory.cli.stores import namespace_options, store_kind
from chatmemory.core.history import MAX_HISTORY_PAGE, HistoryEntry, SupportsHistory
from chatmemory.core.store import validate_memory_id

__all__ = ["history", "parse_age", "trim_history"]

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


def parse_age(value: str) -> datetime.datetime | datetime.timedelta:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` as a ``timedelta``, or an ISO 8601 time with a zone.

    Raises:
        click.BadParameter: ``value`` is neither.
    """
    match = _AGE.match(value)
    if match:
        return datetime.timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    try:
        when = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        when = None
    if when is None or when.utcoffset() is None:
        raise click.BadParameter(
            f"{value!r} is not an age (30d, 12h, 90m, 45s, 2w) or an ISO time with a zone (2026-01-31T00:00:00Z)",
            param_hint="--older-than",
        )
    return when


def _entry_json(entry: HistoryEntry) -> dict[str, Any]:
    from chatmemory.serialization import native

    return {
        "sequence": entry.sequence,
        "written_at": entry.written_at.isoformat(),
        "message": orjson.loads(native.dumps_message(entry.message)),
    }


def _history_store(url: str, namespace: dict[str, str | None]) -> Any:
    options = namespace_options(url, namespace)
    options["history"] = True
    return opened_store(url, options)


@cli.command()
@click.argument("url")
@click.argument("memory_id", metavar="ID")
@click.option("--after", type=click.IntRange(min=0), default=None, help="Only entries after this sequence number.")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_HISTORY_PAGE),
    default=100,
    show_default=True,
    help="At most this many entries.",
)
@click.option("--reverse", is_flag=True, help="Newest first (--after then bounds from above).")
@click.option("--all", "everything", is_flag=True, help="Every entry, read page by page (--limit per page).")
@click.option("--json", "as_json", is_flag=True, help="JSON lines (sequence, written_at, native message).")
@namespace_flags()
@quiet_flag
@reports_failures("history")
def history(
    url: str,
    memory_id: str,
    after: int | None,
    limit: int,
    reverse: bool,
    everything: bool,
    as_json: bool,
    quiet: bool,
    **namespace: str | None,
) -> int:
    """Show the history of one memory: every message written, evicted ones included, with sequence numbers."""
    from chatmemory.demo import describe_message

    reporter = Reporter("history", quiet=quiet)
    try:
        memory_id = validate_memory_id(memory_id)
    except (TypeError, ValueError) as exc:
        raise click.BadParameter(str(exc), param_hint="ID") from exc
    with _history_store(url, namespace) as store:
        if not isinstance(store, SupportsHistory):
            reporter.error(f"{type(store).__name__} keeps no history")
            return EXIT_USAGE
        entries: list[HistoryEntry] = []
        next_after: int | None = after
        with telemetry.operation(backend=store_kind(url), name="cli.history") as op:
            while True:
                page = store.history(memory_id, after=next_after, limit=limit, reverse=reverse)
                entries.extend(page.entries)
                next_after = page.next_after
                if not everything or next_after is None:
                    break
            op.record(items=len(entries))
        if as_json:
            for entry in entries:
                click.echo(orjson.dumps(_entry_json(entry)).decode())
        else:
            table = Table("seq", "written at", "role", "content", box=None, header_style="bold")
            table.title = f"history of {memory_id!r}: {len(entries)} entries"
            for entry in entries:
                role, text = describe_message(entry.message, 2000)
                written = entry.written_at.astimezone(datetime.timezone.utc).isoformat(timespec="milliseconds")
                table.add_row(str(entry.sequence), written, role, Text(text))
            stdout_console().print(table)
        if next_after is not None:
            reporter.info(f"more entries follow: --after {next_after}" + (" --reverse" if reverse else ""))
        return EXIT_OK


@cli.command("trim-history")
@click.argument("url")
@click.option(
    "--older-than",
    "older_than",
    required=True,
    metavar="AGE",
    help="Remove entries written before this: an age (30d, 12h, 90m, 45s, 2w) or an ISO time with a zone.",
)
@click.option("--id", "memory_id", default=None, metavar="ID", help="Only this memory's history.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation (required when stdin is not a terminal).")
@namespace_flags()
@quiet_flag
@reports_failures("trim-history")
def trim_history(
    url: str, older_than: str, memory_id: str | None, yes: bool, quiet: bool, **namespace: str | None
) -> int:
    """Remove old history entries (never a window); print how many were removed."""
    reporter = Reporter("trim-history", quiet=quiet)
    cutoff = parse_age(older_than)
    if memory_id is not None:
        try:
            memory_id = validate_memory_id(memory_id)
        except (TypeError, ValueError) as exc:
            raise click.BadParameter(str(exc), param_hint="--id") from exc
    whose = f"memory {memory_id!r}" if memory_id is not None else "every memory"
    if not yes:
        if not sys.stdin.isatty():
            reporter.error("not trimming without confirmation: stdin is not a terminal; pass --yes")
            return EXIT_USAGE
        if not click.confirm(f"Remove history entries older than {older_than} of {whose}?", err=True):
            reporter.info("nothing removed")
            return EXIT_FAILED
    with _history_store(url, namespace) as store:
        if not isinstance(store, SupportsHistory):
            reporter.error(f"{type(store).__name__} keeps no history")
            return EXIT_USAGE
        with telemetry.operation(backend=store_kind(url), name="cli.trim-history") as op:
            removed = store.trim_history(older_than=cutoff, memory_id=memory_id)
            op.record(items=removed)
        click.echo(f"removed {removed} history entries of {whose}")
        return EXIT_OK

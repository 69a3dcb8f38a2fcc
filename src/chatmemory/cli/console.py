"""Terminal output of the commands: tables, progress bars, per-item failures and the exit status.

Progress bars are Rich's, drawn on stderr and only when both stdout and stderr are terminals and
``--quiet`` is not given: piped output stays clean for the next program, and a cron job's mail holds
no bar frames. Data (ids, message text) is never read as Rich markup: an id like ``[bold]`` is data.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "ProgressBar", "Reporter", "Tally", "interactive", "stdout_console"]

EXIT_OK = 0
"""Everything the command was asked to do was done."""
EXIT_FAILED = 1
"""Some items (memories, lines) failed, or the store failed; each was reported on stderr."""
EXIT_USAGE = 2
"""The command line was wrong, or something the command needs is missing (a driver, a capability)."""


def interactive() -> bool:
    """Whether a person is watching: stdout and stderr are both terminals."""
    return sys.stdout.isatty() and sys.stderr.isatty()


def stdout_console() -> Console:
    """A console for tables on stdout; when piped, wide enough that rows are never wrapped."""
    console = Console(highlight=False, markup=False, soft_wrap=False)
    if not console.is_terminal:
        console = Console(highlight=False, markup=False, width=1000, no_color=True)
    return console


_OUTCOMES = ("exported", "created", "replaced", "unchanged", "expiry set", "expired")
_ORDER = {name: index for index, name in enumerate(_OUTCOMES)}


@dataclass
class Tally:
    """Counts per outcome (``created``, ``unchanged``, ``failed``, ...) of a command over many items."""

    counts: Counter[str] = field(default_factory=Counter)

    @property
    def failed(self) -> int:
        """How many items failed."""
        return self.counts["failed"]

    def summary(self) -> str:
        """``"3 created, 1 unchanged, 1 failed"`` (zero counts left out, failures last; ``"nothing"`` if none)."""
        outcomes = sorted(self.counts, key=lambda outcome: (outcome == "failed", _ORDER.get(outcome, len(_ORDER))))
        parts = [f"{self.counts[outcome]} {outcome}" for outcome in outcomes if self.counts[outcome]]
        return ", ".join(parts) or "nothing"


class ProgressBar:
    """One task of a Rich progress display."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self._progress = progress
        self._task = task

    def advance(self, steps: int = 1) -> None:
        """Count ``steps`` more items done."""
        self._progress.advance(self._task, steps)


class Reporter:
    """Messages to stderr (kept above a running progress bar) and the progress bar itself.

    Args:
        command: the command's name, put before every message.
        quiet: no progress bar and no informational lines; failures are still reported.
    """

    def __init__(self, command: str, *, quiet: bool) -> None:
        self.command = command
        self.quiet = quiet
        self.show_progress = not quiet and interactive()
        self.console = Console(stderr=True, highlight=False, markup=False, soft_wrap=True)

    def error(self, text: str) -> None:
        """Report a failure (always shown)."""
        self.console.print(f"chatmemory {self.command}: {text}")

    def info(self, text: str) -> None:
        """Report what was done (not with ``--quiet``)."""
        if not self.quiet:
            self.console.print(f"chatmemory {self.command}: {text}")

    @contextmanager
    def progress(self, description: str, total: int | None) -> Iterator[ProgressBar]:
        """A progress bar (a spinner when ``total`` is ``None``), drawn only when :attr:`show_progress`."""
        columns = (
            [SpinnerColumn(), TextColumn("{task.description}"), MofNCompleteColumn(), TimeElapsedColumn()]
            if total is None
            else [
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TimeRemainingColumn(),
            ]
        )
        with Progress(*columns, console=self.console, disable=not self.show_progress, transient=False) as bar:
            yield ProgressBar(bar, bar.add_task(description, total=total))

    def track(self, items: Iterable[str], description: str, total: int | None) -> Iterator[str]:
        """``items``, advancing a progress bar as each is taken."""
        with self.progress(description, total) as bar:
            for item in items:
                yield item
                bar.advance()

"""What one in-process run of the ``chatmemory`` command gave, and running it with the real store opener."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from chatmemory.cli import main


@dataclass
class Result:
    """What one run of the command gave."""

    status: int
    out: str
    err: str


def run_main(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> Result:
    """The command in-process with the real store opener."""
    capsys.readouterr()
    status = main(list(argv))
    captured = capsys.readouterr()
    return Result(status, captured.out, captured.err)

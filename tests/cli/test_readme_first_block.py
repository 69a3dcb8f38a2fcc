"""The README's first ``bash`` block, run as written in a fresh clone and a fresh virtualenv.

It is the path a newcomer takes, so it is tested the way they take it: ``git clone`` of this repository
into a scratch directory, then the block through ``bash -e`` there, with no virtualenv active and pip free
to use the package index. Slow (it builds and installs the package), and run by CI's plain ``pytest``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
README = REPOSITORY / "README.md"


def first_bash_block(markdown: str) -> str:
    """The body of the first fenced block tagged ``bash``."""
    match = re.search(r"^```bash\n(.*?)^```", markdown, flags=re.MULTILINE | re.DOTALL)
    assert match, "the README has no ```bash block"
    return match.group(1)


def test_first_bash_block_is_the_clone_path() -> None:
    block = first_bash_block(README.read_text(encoding="utf-8"))
    assert "pip install '.[" in block
    assert block.rstrip().splitlines()[-1].startswith("chatmemory demo")


def _environment_outside_any_virtualenv() -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"}}
    active = Path(sys.prefix) / "bin"
    environment["PATH"] = os.pathsep.join(
        entry for entry in environment.get("PATH", "").split(os.pathsep) if entry and Path(entry) != active
    )
    return environment


@pytest.mark.slow
def test_first_bash_block_works_from_a_fresh_clone(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (REPOSITORY / ".git").exists():
        pytest.skip("needs git and a git checkout of the repository")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPOSITORY), str(clone)], check=True, timeout=120)
    block = first_bash_block((clone / "README.md").read_text(encoding="utf-8"))
    environment = _environment_outside_any_virtualenv()
    completed = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block],
        cwd=clone,
        env=environment,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert "Turn 5:" in completed.stdout
    assert "<- evicted" in completed.stdout
    venv_bin = clone / ".venv" / "bin"
    shown = subprocess.run(
        [str(venv_bin / "pip"), "show", "llm-window-memory"],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert "Name: llm-window-memory" in shown
    assert "Bounded, persistent chat memory" in shown
    version = subprocess.run(
        [str(venv_bin / "chatmemory"), "--version"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert version.startswith("chatmemory 0.")
    assert "(llm-window-memory)" in version

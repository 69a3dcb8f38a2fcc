"""What importing costs: the library imports neither the command's libraries nor OpenTelemetry by itself."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ["click", "rich", "opentelemetry"]


def imported_after(code: str) -> list[str]:
    report = f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"
    probe = f"{code}\nimport json, sys\n{report}"
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    return list(json.loads(completed.stdout.splitlines()[-1]))


def test_import_chatmemory_and_its_telemetry_imports_none_of_them() -> None:
    assert imported_after("import chatmemory, chatmemory.telemetry, chatmemory.transfer, chatmemory.inspection") == []


def test_opentelemetry_is_imported_on_the_first_operation() -> None:
    code = "from chatmemory import telemetry\nwith telemetry.operation(backend='memory', name='load'): pass"
    assert imported_after(code) == ["opentelemetry"]

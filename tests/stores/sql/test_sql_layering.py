"""What the SQL store's modules import: plans without drivers, stores without the migrations."""

from __future__ import annotations

import json
import subprocess
import sys

DRIVERS = ["sqlalchemy", "alembic", "psycopg", "pymysql", "aiomysql", "aiosqlite", "greenlet"]


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_the_plan_imports_without_any_driver() -> None:
    hide = "; ".join(f"sys.modules[{name!r}] = None" for name in DRIVERS)
    code = (
        f"import sys; {hide}\n"
        "from chatmemory.stores.sql import commands, history, operations, outcomes, plan\n"
        "print('ok', plan.plan_diff.__name__)\n"
    )
    assert _run(code).split() == ["ok", "plan_diff"]


def test_the_check_would_see_a_driver_import() -> None:
    # The test above can fail: a hidden module that is imported raises.
    hide = "import sys; sys.modules['sqlalchemy'] = None"
    result = subprocess.run(
        [sys.executable, "-c", f"{hide}\nfrom chatmemory.stores.sql import statements"], capture_output=True, text=True
    )
    assert result.returncode != 0 and "sql" in result.stderr


def test_the_stores_never_import_the_migrations() -> None:
    code = (
        "import json, sys\n"
        "import chatmemory.stores.sql.store, chatmemory.aio.stores.sql\n"
        "from chatmemory.stores.sql import SQLChatMemoryStore\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('chatmemory.migrations') or m == 'alembic')))"
    )
    assert json.loads(_run(code)) == []


def test_the_migrations_check_would_see_an_import() -> None:
    code = (
        "import json, sys\nimport chatmemory.migrations\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('chatmemory.migrations'))))"
    )
    assert "chatmemory.migrations" in json.loads(_run(code))

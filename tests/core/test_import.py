"""Importing chatmemory imports no database driver."""

from __future__ import annotations

import json
import subprocess
import sys

DRIVERS = ["redis", "sqlalchemy", "psycopg", "pymysql", "pymongo", "tiktoken", "alembic", "bson"]


def test_import_chatmemory_imports_no_driver() -> None:
    code = (
        "import json, sys, chatmemory; "
        "chatmemory.MessageWindowChatMemory(max_messages=2).add(chatmemory.UserMessage('hi')); "
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({DRIVERS!r}))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_the_check_would_see_a_driver() -> None:
    code = (
        "import json, sys, chatmemory, redis; "
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({DRIVERS!r}))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "redis" in json.loads(out)

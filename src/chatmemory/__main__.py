"""``python -m chatmemory``: the same as the ``chatmemory`` command."""

from __future__ import annotations

from chatmemory.cli import main

raise SystemExit(main())

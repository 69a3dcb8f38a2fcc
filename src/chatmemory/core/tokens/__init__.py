"""Token counting for token windows: the chat framing rule, the exact OpenAI counters, the calibrated default.

The public names live in :mod:`chatmemory.core.token_estimators`; this package holds one module per concept:
:mod:`~chatmemory.core.tokens.framing` (how a chat message is counted around its texts),
:mod:`~chatmemory.core.tokens.openai` (exact counts with OpenAI's encodings) and
:mod:`~chatmemory.core.tokens.scripts` (the dependency-free estimate, calibrated per script).
"""

from __future__ import annotations

"""Adapters to other frameworks, each behind its own extra (importing this package imports none of them)."""

from __future__ import annotations

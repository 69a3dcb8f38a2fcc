"""``data:<mime>;base64,<data>`` URLs: how inline media travels in provider message formats."""

from __future__ import annotations

from chatmemory.core.errors import SerializationError

__all__ = ["data_url", "parse_data_url"]


def data_url(mime_type: str, base64_data: str) -> str:
    """The ``data:`` URL carrying ``base64_data`` of type ``mime_type``.

    Raises:
        SerializationError: ``mime_type`` holds a comma, which would end the URL's header early.
    """
    if "," in mime_type:
        raise SerializationError(f"MIME type {mime_type!r} cannot go in a data: URL (it holds a comma)")
    return f"data:{mime_type};base64,{base64_data}"


def parse_data_url(url: str) -> tuple[str | None, str] | None:
    """``(mime_type, base64_data)`` of a base64 ``data:`` URL (``mime_type`` None when empty), else None."""
    if not url.startswith("data:") or "," not in url:
        return None
    header, data = url[len("data:") :].split(",", 1)
    if not header.endswith(";base64"):
        return None
    return header[: -len(";base64")] or None, data

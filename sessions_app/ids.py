"""Session ids: a new one is a UUID in its dashed form; one chosen by a caller or brought from
another store (Agno's `fixed_id_for_demo`, `session_101`) is any short run of safe characters."""

from __future__ import annotations

import re
import uuid
from typing import Any

# Safe in a URL path segment, a filename and a log line. At least one character is not a dot,
# since `.` and `..` mean something else in a path.
SESSION_ID_PATTERN = r"^[A-Za-z0-9._:-]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*$"
SESSION_ID_MAX_LENGTH = 128
_SESSION_ID = re.compile(SESSION_ID_PATTERN)


def new_session_id() -> str:
    return str(uuid.uuid4())


def is_session_id(value: Any) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= SESSION_ID_MAX_LENGTH
        and _SESSION_ID.fullmatch(value) is not None
    )


def session_id_or_none(value: Any) -> str | None:
    """The id as stored (a UUID in its dashed form), or None when `value` cannot be one."""
    if isinstance(value, uuid.UUID):
        return str(value)
    return value if is_session_id(value) else None

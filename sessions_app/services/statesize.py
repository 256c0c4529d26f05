"""The size limit on session state and metadata (PARLEY_MAX_STATE_BYTES), for every door that
writes them: each is sent to the model, stored on every run and shown on every page load."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings


class StateTooLarge(ValueError):
    """A state or metadata object over the limit; the API answers 413."""


def json_bytes(value: Any) -> int:
    """The size of `value` as compact UTF-8 JSON, the way it is stored and sent."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def check(name: str, value: Any) -> None:
    """Raise StateTooLarge when `value` (a session_state or metadata object) is over the limit."""
    limit = settings.PARLEY_MAX_STATE_BYTES
    size = json_bytes(value)
    if size > limit:
        raise StateTooLarge(
            f"{name} is too large ({size} bytes of JSON; the limit is {limit} bytes)."
        )

"""What an error answers: `{"detail": ...}`, and a failed model call's run and session."""

from __future__ import annotations

import uuid
from typing import Any

from ninja import Schema


class ErrorOut(Schema):
    detail: str | list[dict[str, Any]]


class UpstreamErrorOut(Schema):
    detail: str
    run_id: uuid.UUID
    session_id: str

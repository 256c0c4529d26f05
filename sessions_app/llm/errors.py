"""A model request's failure, as a user is shown it and as HTTP answers it (502 or 504)."""

from __future__ import annotations

import email.utils
import math
from datetime import UTC, datetime
from typing import Any

import openai

from safety.redact import mask_secrets
from sessions_app.llm.transport import TIMEOUT_ERRORS, TRANSPORT_ERRORS

TIMEOUT_MESSAGE = "The model did not answer in time."


class LLMError(Exception):
    """The upstream failed; `message` is fit to show a user, `status` maps to 502 or 504.

    What an endpoint says may quote a key (its own, a proxy's, one from the request): whatever
    looks like one is masked here, before the message is stored, streamed or answered."""

    def __init__(self, message: str, *, status: int = 502, unavailable: bool = False) -> None:
        message = mask_secrets(message)
        super().__init__(message)
        self.message = message
        self.status = status
        # The endpoint was away or overloaded (unreachable, timed out, 408, 429, 502-504, a
        # stream cut off), not refusing this request: asking again later may well succeed.
        self.unavailable = unavailable


DETAIL_LIMIT = 300  # characters of an endpoint's own error message kept


def describe(exc: BaseException) -> LLMError:
    """Any failure of a model request as an LLMError."""
    if isinstance(exc, LLMError):
        return exc
    if isinstance(exc, (openai.APITimeoutError, *TIMEOUT_ERRORS)):
        return LLMError(TIMEOUT_MESSAGE, status=504, unavailable=True)
    if isinstance(exc, (openai.APIConnectionError, *TRANSPORT_ERRORS)):
        return LLMError(
            "The model endpoint could not be reached or closed the connection.", unavailable=True
        )
    if isinstance(exc, openai.APIStatusError):
        status = 504 if exc.status_code in (408, 504) else 502
        message = f"The model endpoint answered {exc.status_code}: {_error_detail(exc)}"
        wait = _retry_after(exc.response.headers)
        if wait is not None:
            message = f"{message.rstrip('.')}. Try again in {_seconds(wait)}."
        # Busy, or a gateway without its model: not a 500, which is about this request.
        away = exc.status_code in (408, 429, 502, 503, 504)
        return LLMError(message, status=status, unavailable=away)
    if isinstance(exc, openai.APIError):
        return LLMError(f"The model endpoint failed: {exc.message}")
    return LLMError(f"The model endpoint failed: {exc}")


def _error_detail(exc: openai.APIStatusError) -> str:
    """The endpoint's own message, clipped: some send a whole validation dump, with the paths
    of their files, and it is shown to users."""
    body = exc.body
    detail = exc.message
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            detail = str(inner["message"])
    detail = " ".join(detail.split())
    return detail if len(detail) <= DETAIL_LIMIT else detail[: DETAIL_LIMIT - 1] + "…"


def _retry_after(headers: Any) -> float | None:
    """Seconds the endpoint asked us to wait before trying again (`Retry-After`, in seconds or
    as an HTTP date, or OpenAI's `retry-after-ms`); None when it did not say."""
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        if value.strip().isdigit():
            return float(value)
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):  # a date without a zone cannot be compared: unsaid
        return None


def _seconds(wait: float) -> str:
    count = max(1, math.ceil(wait))
    return "1 second" if count == 1 else f"{count} seconds"


def status_for_error(message: str) -> int:
    """The HTTP status (502 or 504) of a failure described by `describe`, from its message,
    which is all a finished run keeps of it."""
    gateway_timeout = ("The model endpoint answered 408:", "The model endpoint answered 504:")
    return 504 if message == TIMEOUT_MESSAGE or message.startswith(gateway_timeout) else 502

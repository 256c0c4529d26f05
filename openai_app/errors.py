"""Errors as OpenAI's API answers them: `{"error": {"message", "type", "param", "code"}}` with
OpenAI's status codes, so an OpenAI client raises the exception it would raise for OpenAI's."""

from __future__ import annotations

import json
import logging
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpResponse

from sessions_app.accounts import TokenExpired, Unauthorized
from sessions_app.engine import InputError, NotServing, RunConflict
from sessions_app.services import outage
from sessions_app.services.access import NotFound
from sessions_app.services.ratelimit import RateLimited
from sessions_app.services.sessions import SessionBusy, SessionIdTaken
from sessions_app.services.statesize import StateTooLarge

log = logging.getLogger("parley.openai")

INVALID = "invalid_request_error"
NOT_SERVING_RETRY_SECONDS = 2


class OpenAIError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = INVALID,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message = status, message
        self.type, self.param, self.code = type, param, code
        self.headers = headers or {}
        self.extra = extra or {}  # Parley's own keys beside OpenAI's, e.g. a budget's figures

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
                **self.extra,
            }
        }

    def response(self) -> HttpResponse:
        body = json.dumps(self.body())
        response = HttpResponse(body, status=self.status, content_type="application/json")
        for name, value in self.headers.items():
            response[name] = value
        return response


BAD_KEY = "Incorrect API key provided: send a Parley API token as Bearer."


def bad_key(message: str = BAD_KEY) -> OpenAIError:
    headers = {"WWW-Authenticate": 'Bearer realm="parley"'}
    return OpenAIError(401, message, code="invalid_api_key", headers=headers)


def unknown_model(model: str) -> OpenAIError:
    return OpenAIError(
        404,
        f"The model `{model}` does not exist or you do not have access to it.",
        param="model",
        code="model_not_found",
    )


def translated(exc: Exception, model: str = "") -> OpenAIError | None:
    """What Parley's own refusal is called in OpenAI's terms; None for a fault of Parley's."""
    if isinstance(exc, OpenAIError):
        return exc
    if isinstance(exc, TokenExpired):
        return bad_key(str(exc))
    if isinstance(exc, Unauthorized):
        return bad_key()
    if isinstance(exc, NotFound):
        return unknown_model(model)
    if isinstance(exc, PermissionDenied):
        return OpenAIError(403, str(exc) or "Forbidden.", code="permission_denied")
    if isinstance(exc, RateLimited):
        headers = {"Retry-After": str(exc.seconds)}
        kind = "requests" if exc.code == "rate_limit_exceeded" else exc.code
        return OpenAIError(
            429, str(exc), type=kind, code=exc.code, headers=headers, extra=exc.fields()
        )
    if isinstance(exc, InputError):
        code = "string_above_max_length" if exc.status == 413 else None
        return OpenAIError(400, exc.message, param="messages", code=code)
    if isinstance(exc, StateTooLarge):
        return OpenAIError(400, str(exc), param="metadata")
    # OpenAI's SDKs retry a 409 unless told not to: asking again cannot change these.
    final = {"X-Should-Retry": "false"}
    if isinstance(exc, (RunConflict, SessionBusy)):
        return OpenAIError(409, str(exc), code="session_busy", headers=final)
    if isinstance(exc, SessionIdTaken):
        return OpenAIError(
            409, str(exc), param="session_id", code="session_id_taken", headers=final
        )
    if isinstance(exc, NotServing):
        headers = {"Retry-After": str(NOT_SERVING_RETRY_SECONDS)}
        return OpenAIError(503, str(exc), type="server_error", headers=headers)
    message = outage.describe(exc)
    if message is not None:
        log.error("database unavailable: %s", exc)
        return OpenAIError(503, message, type="server_error")
    return None

"""Every failure the services raise, answered as {"detail": ...} with its HTTP status."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pydantic
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import InterfaceError, InternalError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError

from sessions_app.accounts import TokenExpired, Unauthorized
from sessions_app.engine import InputError, NotServing, RunConflict
from sessions_app.services import outage
from sessions_app.services.access import NotFound
from sessions_app.services.ratelimit import RateLimited
from sessions_app.services.sessions import SessionBusy, SessionIdTaken
from sessions_app.services.statesize import StateTooLarge
from sessions_app.services.versions import InvalidConfig

NOT_FOUND = "Not found."
NOT_SERVING_RETRY_SECONDS = 2
UNAUTHENTICATED = "Authentication required: a Bearer token or a session."
log = logging.getLogger("parley.api")


def install_error_handlers(api: NinjaAPI) -> None:
    def detail(status: int, message: Callable[[Any], str]) -> Callable[..., HttpResponse]:
        def handler(request: HttpRequest, exc: Exception) -> HttpResponse:
            return api.create_response(request, {"detail": message(exc)}, status=status)

        return handler

    def input_error(request: HttpRequest, exc: InputError) -> HttpResponse:
        return api.create_response(request, {"detail": exc.message}, status=exc.status)

    def invalid_config(request: HttpRequest, exc: InvalidConfig) -> HttpResponse:
        # A list of problems, each at its field, as a body that fails its schema answers.
        problems = [
            {"type": "value_error", "loc": ["body", "payload", name], "msg": message}
            for name, messages in exc.problems.items()
            for message in messages
        ]
        return api.create_response(request, {"detail": problems}, status=422)

    def database_outage(request: HttpRequest, exc: Exception) -> HttpResponse:
        message = outage.describe(exc)
        if message is None:
            raise exc  # a bug: Django's 500
        log.error("%s %s: %s", request.method, request.path, exc)
        return api.create_response(request, {"detail": message}, status=503)

    def server_bug(request: HttpRequest, exc: Exception) -> HttpResponse:
        # pydantic's ValidationError is a ValueError, but here it means a response did not fit
        # its schema: a bug to surface as a 500, not a 422 blamed on the client.
        return api.on_exception(request, RuntimeError(f"Response failed validation: {exc}"))

    _install_retry_and_auth_handlers(api)
    api.add_exception_handler(NotFound, detail(404, lambda exc: NOT_FOUND))
    api.add_exception_handler(Http404, detail(404, lambda exc: NOT_FOUND))
    api.add_exception_handler(PermissionDenied, detail(403, lambda e: str(e) or "Forbidden."))
    api.add_exception_handler(RunConflict, detail(409, str))
    api.add_exception_handler(SessionBusy, detail(409, str))
    api.add_exception_handler(SessionIdTaken, detail(409, str))
    api.add_exception_handler(InputError, input_error)  # type: ignore[arg-type]
    api.add_exception_handler(
        RequestDataTooBig, detail(413, lambda exc: "The request body is too large.")
    )
    api.add_exception_handler(StateTooLarge, detail(413, str))
    api.add_exception_handler(ValueError, detail(422, str))
    api.add_exception_handler(InvalidConfig, invalid_config)  # type: ignore[arg-type]
    for failure in (OperationalError, InterfaceError, InternalError):
        api.add_exception_handler(failure, database_outage)
    api.add_exception_handler(pydantic.ValidationError, server_bug)


def _install_retry_and_auth_handlers(api: NinjaAPI) -> None:
    """The answers that carry a header telling the client what to do next: sign in, or retry."""

    def unauthenticated(request: HttpRequest, exc: Exception) -> HttpResponse:
        message = str(exc) if isinstance(exc, TokenExpired) else UNAUTHENTICATED
        response = api.create_response(request, {"detail": message}, status=401)
        response["WWW-Authenticate"] = 'Bearer realm="parley"'
        return response

    def rate_limited(request: HttpRequest, exc: RateLimited) -> HttpResponse:
        body = {"detail": str(exc), **exc.fields()}
        response = api.create_response(request, body, status=429)
        response["Retry-After"] = str(exc.seconds)
        return response

    def not_serving(request: HttpRequest, exc: NotServing) -> HttpResponse:
        # The server is stopping; another process (or this one, restarted) takes the retry.
        response = api.create_response(request, {"detail": str(exc)}, status=503)
        response["Retry-After"] = str(NOT_SERVING_RETRY_SECONDS)
        return response

    api.add_exception_handler(AuthenticationError, unauthenticated)
    api.add_exception_handler(Unauthorized, unauthenticated)  # a token claim, refused late
    api.add_exception_handler(RateLimited, rate_limited)  # type: ignore[arg-type]
    api.add_exception_handler(NotServing, not_serving)  # type: ignore[arg-type]

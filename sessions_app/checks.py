"""System checks that refuse dangerous production settings."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register, run_checks

_rechecking = contextvars.ContextVar("rechecking", default=False)


@register(Tags.security, deploy=False)
def check_production_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    if settings.DEBUG:
        return []
    errors = []
    if settings.SECRET_KEY == settings.DEV_SECRET_KEY:
        errors.append(
            Error("SECRET_KEY is the development default.", hint="Set SECRET_KEY.", id="parley.E1")
        )
    workers = int(getattr(settings, "PARLEY_WORKERS", 1))
    if workers > 1 and not settings.REDIS_URL:
        errors.append(
            Error(
                "Several processes need a shared channel layer.",
                hint="Set REDIS_URL.",
                id="parley.E2",
            )
        )
    return errors


@register()
def check_stale_run_window(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """A run is judged dead after PARLEY_STALE_RUN_AFTER without a heartbeat: shorter than three
    beats, one late beat (a busy host, a slow database) would end runs that are alive."""
    beat, window = settings.PARLEY_HEARTBEAT_INTERVAL, settings.PARLEY_STALE_RUN_AFTER
    if beat <= 0:
        hint = "Set PARLEY_HEARTBEAT_INTERVAL to a number of seconds (10 by default)."
        return [Error("PARLEY_HEARTBEAT_INTERVAL must be over 0.", hint=hint, id="parley.E4")]
    if window >= 3 * beat:
        return []
    return [
        Error(
            f"PARLEY_STALE_RUN_AFTER ({window:g} s) is shorter than three heartbeats "
            f"(PARLEY_HEARTBEAT_INTERVAL is {beat:g} s): live runs would be ended as dead.",
            hint=f"Set PARLEY_STALE_RUN_AFTER to {3 * beat:g} or more, or beat more often.",
            id="parley.E3",
        )
    ]


@register(Tags.security, deploy=True)
def check_security_as_stock(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Django's security checks, run as if MIDDLEWARE were the stock classes that
    PARLEY_TUNE_MIDDLEWARE subclasses: what they find then and not as configured."""
    if settings.MIDDLEWARE == settings.STOCK_MIDDLEWARE or _rechecking.get():
        return []
    token = _rechecking.set(True)
    try:
        as_configured = run_checks(tags=[Tags.security], include_deployment_checks=True)
        with _middleware(settings.STOCK_MIDDLEWARE):
            as_stock = run_checks(tags=[Tags.security], include_deployment_checks=True)
    finally:
        _rechecking.reset(token)
    return [message for message in as_stock if message not in as_configured]


@contextmanager
def _middleware(classes: list[str]) -> Iterator[None]:
    """MIDDLEWARE as `classes` while the checks run (django.test's override_settings would load
    the test framework into every process that imports the checks)."""
    configured = settings.MIDDLEWARE
    settings.MIDDLEWARE = classes
    try:
        yield
    finally:
        settings.MIDDLEWARE = configured

"""System checks that refuse dangerous production settings."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, register


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

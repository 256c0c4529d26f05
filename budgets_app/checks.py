"""Refuse to start with a default budget that cannot be read, naming the part."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from budgets_app.defaults import default_budget


@checks.register()
def default_budget_readable(app_configs: Any = None, **kwargs: Any) -> list[checks.Error]:
    try:
        default_budget()
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="parley.E5")]
    return []

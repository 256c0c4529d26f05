"""Parley's settings plus the baseline app; no migrations: `migrate --run-syncdb` makes its table.

The benchmark's helper processes use these settings too, so they can count the baseline's rows.
"""

from __future__ import annotations

from project.settings import *  # noqa: F403
from project.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "bench.naive"]
ASGI_APPLICATION = "bench.naive.asgi.application"

from __future__ import annotations

from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Parley"

    def ready(self) -> None:
        from sessions_app import checks  # noqa: F401  (registers the system checks)
        from sessions_app.accounts import signins  # noqa: F401  (connects its signal receivers)
        from sessions_app.usage import deleted

        deleted.connect()

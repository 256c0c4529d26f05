from __future__ import annotations

from django.apps import AppConfig


class PrivacyConfig(AppConfig):
    name = "privacy_app"
    verbose_name = "Privacy"

    def ready(self) -> None:
        from privacy_app import admin_hooks

        admin_hooks.install()

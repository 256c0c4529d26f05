from __future__ import annotations

from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "datasets_app"
    verbose_name = "Datasets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from datasets_app import hooks

        hooks.connect()

from __future__ import annotations

from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "datasets_app"
    verbose_name = "Datasets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from datasets_app.services import rules
        from sessions_app.signals import runs_rated

        runs_rated.connect(rules.on_runs_rated, dispatch_uid="datasets_app.rules")

from __future__ import annotations

from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit_app"
    verbose_name = "Audit"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from audit_app import listeners

        listeners.connect()

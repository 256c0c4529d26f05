from __future__ import annotations

from django.apps import AppConfig


class BudgetsConfig(AppConfig):
    name = "budgets_app"
    verbose_name = "Budgets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from budgets_app import (
            checks,  # noqa: F401  (registers the default budget's check)
            dashboard,
            gate,
            standing,
        )
        from sessions_app.accounts import SettingsSection, add_settings_section
        from sessions_app.services.admission import set_admission_check

        set_admission_check(gate)
        template = "budgets_app/_settings_section.html"
        add_settings_section(SettingsSection("budgets", template, standing.settings_section))
        dashboard.install()

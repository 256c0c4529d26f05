from django.apps import AppConfig


class EvalsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "evals_app"
    verbose_name = "Evaluation"

    def ready(self) -> None:
        from evals_app import live

        live.connect()

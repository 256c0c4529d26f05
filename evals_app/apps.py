from django.apps import AppConfig


class EvalsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "evals_app"
    verbose_name = "Evaluation"

    def ready(self) -> None:
        # Live runs are scored as they end; experiments run on the engine's loop of a server.
        # The engine names no app, so this one plugs its poller into its start and stop.
        from evals_app import live, poller, runner

        live.connect()
        poller.connect(runner.run_waiting)

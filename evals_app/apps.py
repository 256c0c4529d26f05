from django.apps import AppConfig


class EvalsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "evals_app"
    verbose_name = "Evaluation"

    def ready(self) -> None:
        # Experiments run on the engine's loop of a server: the engine names no app, so this
        # one plugs its poller into the engine's start and stop.
        from evals_app import poller, runner

        poller.connect(runner.run_waiting)

from django.apps import AppConfig


class ServingConfig(AppConfig):
    """Installed for its `serve` command; it has no models."""

    name = "serving"

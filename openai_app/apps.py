from __future__ import annotations

from django.apps import AppConfig


class OpenAIAppConfig(AppConfig):
    name = "openai_app"
    verbose_name = "OpenAI-compatible API"

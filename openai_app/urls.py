from __future__ import annotations

from django.urls import path, re_path

from openai_app import views

urlpatterns = [
    path("models", views.list_models, name="openai-models"),
    path("models/<path:model>", views.retrieve_model, name="openai-model"),
    path("chat/completions", views.chat_completions, name="openai-chat-completions"),
    re_path(r"^.*$", views.unknown_path),
]

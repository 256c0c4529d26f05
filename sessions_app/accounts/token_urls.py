from __future__ import annotations

from django.urls import path

from sessions_app.accounts import token_views

urlpatterns = [
    path("", token_views.api_tokens, name="api_tokens"),
    path("<int:token_id>/rename/", token_views.rename_token, name="api_token_rename"),
    path("<int:token_id>/revoke/", token_views.revoke_token, name="api_token_revoke"),
]

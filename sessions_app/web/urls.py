from __future__ import annotations

from django.urls import path, register_converter

from sessions_app import accounts
from sessions_app.web import views


class SessionIdConverter:
    """Any text a session id may be (see ids.py); the access gate answers the rest."""

    regex = r"[A-Za-z0-9._:-]{1,128}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: object) -> str:
        return str(value)


register_converter(SessionIdConverter, "session_id")

urlpatterns = [
    path("", views.home, name="home"),
    path("s/<session_id:session_id>/", views.session_page, name="session_page"),
    path("s/<session_id:session_id>/rename", views.session_rename, name="session_rename"),
    path("s/<session_id:session_id>/delete", views.session_delete, name="session_delete"),
    path("s/<session_id:session_id>/settings", views.session_settings, name="session_settings"),
    path("s/<session_id:session_id>/state", views.session_state, name="session_state"),
    path("sessions/", views.session_list, name="session_list"),
    path("settings/", accounts.account_settings, name="account_settings"),
    path("runs/<uuid:run_id>/feedback", views.run_feedback, name="run_feedback"),
]

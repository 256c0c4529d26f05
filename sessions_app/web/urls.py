from __future__ import annotations

from django.urls import path

from sessions_app.web import account_views, views

urlpatterns = [
    path("", views.home, name="home"),
    path("s/<uuid:session_id>/", views.session_page, name="session_page"),
    path("s/<uuid:session_id>/rename", views.session_rename, name="session_rename"),
    path("s/<uuid:session_id>/delete", views.session_delete, name="session_delete"),
    path("s/<uuid:session_id>/settings", views.session_settings, name="session_settings"),
    path("s/<uuid:session_id>/state", views.session_state, name="session_state"),
    path("sessions/", views.session_list, name="session_list"),
    path("settings/", account_views.account_settings, name="account_settings"),
    path("runs/<uuid:run_id>/feedback", views.run_feedback, name="run_feedback"),
]

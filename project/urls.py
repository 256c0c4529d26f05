from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from project.api import api
from sessions_app import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("accounts/", include("sessions_app.auth_urls")),
    path("tokens/", include("sessions_app.token_urls")),
    path("", include("sessions_app.urls")),
]

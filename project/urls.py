from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from sessions_app import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("", include("sessions_app.urls")),
]

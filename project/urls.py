from __future__ import annotations

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.utils.functional import lazy
from django.views.generic import RedirectView

from project.api import api
from sessions_app import accounts
from sessions_app.usage import dashboard_view
from sessions_app.web import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    # Browsers ask for this path on pages without a <link rel="icon"> (the admin's).
    path("favicon.ico", RedirectView.as_view(url=lazy(static, str)("parley/favicon.svg"))),
    # Before the admin's own URLs, which would answer this path with a 404.
    path("admin/dashboard/", admin.site.admin_view(dashboard_view), name="admin-dashboard"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("v1/", include("openai_app.urls")),
    path("accounts/", include(accounts.auth_urls)),
    path("tokens/", include(accounts.token_urls)),
    path("", include("sessions_app.web.urls")),
    # After the chat's URLs, which register the session id's converter these use.
    path("", include("shares_app.urls")),
]

# A refusal names its reason (the permission missing), on a page or to the chat page's htmx.
handler403 = "sessions_app.web.errors.forbidden"

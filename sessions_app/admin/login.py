"""The admin's sign-in counts wrong passwords like Parley's own login page."""

from __future__ import annotations

from django.contrib import admin

from sessions_app.web.login_forms import AdminLoginForm

admin.site.login_form = AdminLoginForm

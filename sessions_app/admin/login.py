"""The admin's sign-in counts wrong passwords like Parley's own login page."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm

from sessions_app.accounts import ThrottledLogin


class AdminLoginForm(ThrottledLogin, AdminAuthenticationForm):
    pass


admin.site.login_form = AdminLoginForm

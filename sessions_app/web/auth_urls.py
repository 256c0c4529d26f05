from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from sessions_app.web import auth_views as accounts

urlpatterns = [
    path("login/", accounts.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("signup/", accounts.signup, name="signup"),
]

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from sessions_app.accounts import auth_views as pages

urlpatterns = [
    path("login/", pages.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("signup/", pages.signup, name="signup"),
]

"""Accounts pages around Django's auth views: sign-up, and a login page that knows about it."""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model, login
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from sessions_app.accounts.login_throttle import ThrottledLogin
from sessions_app.usernames import SIGN_UP_RULE


class SignupForm(UserCreationForm):
    """Django's form, bound to Parley's user model (it also refuses names taken in any case),
    and Django's username rule: no ':', which marks the accounts an import makes."""

    class Meta(UserCreationForm.Meta):
        model = get_user_model()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["username"].validators.append(SIGN_UP_RULE)


class LoginForm(ThrottledLogin, AuthenticationForm):
    pass


class LoginView(auth_views.LoginView):
    form_class = LoginForm
    redirect_authenticated_user = True

    def form_invalid(self, form: LoginForm) -> HttpResponse:
        response = super().form_invalid(form)
        if form.retry_after is not None:
            response.status_code = 429
            response["Retry-After"] = str(math.ceil(form.retry_after))
        return response

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        # Read per request, not at import: the setting may change without a code change.
        return super().get_context_data(**kwargs, signup_enabled=settings.PARLEY_SIGNUP_ENABLED)


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    # A closed instance should look as if the page did not exist, not as if it were forbidden.
    if not settings.PARLEY_SIGNUP_ENABLED:
        raise Http404("Sign-up is turned off.")
    if request.user.is_authenticated:
        return redirect(settings.LOGIN_REDIRECT_URL)
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user)
        return redirect(settings.LOGIN_REDIRECT_URL)
    return render(request, "registration/signup.html", {"form": form})

"""A signed-in user's own settings: whether their conversations may be used for training, and
the sections other apps add (sections.py)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from sessions_app.accounts.sections import sections_for
from sessions_app.models import User


class TrainingForm(forms.ModelForm):
    class Meta:
        model = User
        fields = ["allow_training"]
        labels = {"allow_training": "Allow my conversations to be used to train and improve models"}
        help_texts = {
            "allow_training": "When off, your conversations are left out of every exported "
            "training file and are never shown to an agent as an example."
        }


@login_required
@require_http_methods(["GET", "POST"])
def account_settings(request: HttpRequest) -> HttpResponse:
    # An unticked box sends nothing: an empty POST is still a submitted form.
    data = request.POST if request.method == "POST" else None
    form = TrainingForm(data, instance=request.user)
    if request.method == "POST" and form.is_valid():
        form.save()
        allowed = form.cleaned_data["allow_training"]
        word = "may" if allowed else "will not"
        messages.success(request, f"Saved: your conversations {word} be used for training.")
        return redirect("account_settings")
    context = {"form": form, "sections": sections_for(request)}
    return render(request, "sessions_app/account_settings.html", context)

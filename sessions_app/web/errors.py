"""Refusals as people see them: the reason why, on a page of its own or, for a request the chat
page made with htmx, as the plain text its notice area shows."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseForbidden
from django.template.loader import render_to_string


def forbidden(request: HttpRequest, exception: Exception | None = None) -> HttpResponseForbidden:
    # The reason names the permission missing ("You need the “delete session” permission.").
    reason = str(exception or "") or "You may not do that."
    if request.headers.get("HX-Request") == "true":
        return HttpResponseForbidden(reason, content_type="text/plain; charset=utf-8")
    page = render_to_string("403.html", {"reason": reason}, request=request)
    return HttpResponseForbidden(page)

"""People: what each has done in Parley, beside Django's own user admin."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.utils.safestring import SafeString

from sessions_app.accounts import signins
from sessions_app.admin import display, extensions
from sessions_app.admin.base import ListAdmin, total_per_row
from sessions_app.models import LLMCall, Run, Session, User

_password_change = admin.site.password_change


def _own_password_change(request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
    # /admin/password_change/: Django keeps this browser signed in with the new password, and so
    # its chat sockets stay open; those of the account's other browsers close.
    with signins.keeping(request):
        return _password_change(request, extra_context)


# Read by AdminSite.get_urls, which runs when the URLconf loads, after the admin modules.
admin.site.password_change = _own_password_change


@admin.register(User)
class ParleyUserAdmin(extensions.ExtraActions, ListAdmin, UserAdmin):
    list_display = [
        "username", "email", "is_staff", "is_active", "sessions", "runs", "tokens",
        "last_active", "date_joined",
    ]  # fmt: skip

    def user_change_password(
        self, request: HttpRequest, id: str, form_url: str = ""
    ) -> HttpResponse:
        # Staff changing their own password stay signed in in this browser, and so do its
        # chat sockets; those of their other browsers close.
        with signins.keeping(request):
            return super().user_change_password(request, id, form_url)

    def get_queryset(self, request: HttpRequest) -> QuerySet[User]:
        latest = Session.objects.filter(user=OuterRef("pk")).order_by("-updated_at")
        return (
            super()
            .get_queryset(request)
            .annotate(
                session_count=total_per_row(Session.objects.all(), "user", "COUNT"),
                run_count=total_per_row(Run.objects.all(), "user", "COUNT"),
                token_count=total_per_row(LLMCall.objects.all(), "user", "SUM", "total_tokens"),
                last_active_at=Subquery(latest.values("updated_at")[:1]),
            )
        )

    @admin.display(description="sessions")
    def sessions(self, obj: User) -> SafeString:
        url = display.changelist_url(Session, owner=obj.get_username())
        return display.link(url, display.tokens(obj.session_count or 0))

    @admin.display(description="runs")
    def runs(self, obj: User) -> SafeString:
        url = display.changelist_url(Run, user__id__exact=obj.pk)
        return display.link(url, display.tokens(obj.run_count or 0))

    @admin.display(description="tokens")
    def tokens(self, obj: User) -> str:
        return display.tokens(obj.token_count or 0)

    @admin.display(description="last active", ordering="last_active_at")
    def last_active(self, obj: User) -> str:
        when = obj.last_active_at
        return when.strftime("%Y-%m-%d %H:%M") if when else display.EMPTY

"""What privacy adds to the chat app's admin lists: on sessions, keeping them past the
retention period (and no longer); on people, erasing them after a confirmation page. Each is
written to the audit log."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from audit_app.models import Action as Audited
from audit_app.record import record
from privacy_app import erasure
from sessions_app.admin.extensions import Action, add_action
from sessions_app.models import Session, User


@admin.action(description="Keep the selected sessions past the retention period")
def keep_sessions(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> None:
    _set_kept(modeladmin, request, queryset, True)


@admin.action(description="Stop keeping the selected sessions (the retention period applies)")
def stop_keeping_sessions(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet
) -> None:
    _set_kept(modeladmin, request, queryset, False)


def _set_kept(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet, kept: bool
) -> None:
    changed = list(queryset.select_related(None).exclude(kept=kept).only("pk", "user_id"))
    Session.objects.filter(pk__in=[s.pk for s in changed]).update(kept=kept)
    verb = "Kept" if kept else "Stopped keeping"
    for session in changed:
        record(
            request.user,
            Audited.KEPT,
            f"{verb} session {session.pk}",
            subject=session.user_id,
            obj=session,
        )
    modeladmin.message_user(request, f"{verb} {len(changed)} session(s).", messages.SUCCESS)


@admin.action(description="Erase the selected people…")
def erase_people(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet
) -> HttpResponse | None:
    people = list(queryset.exclude(pk=request.user.pk))
    if not request.user.is_superuser:
        people = [p for p in people if not p.is_superuser]
    if request.POST.get("confirmed") == "yes":
        for person in people:
            report = erasure.erase(person, actor=request.user)
            modeladmin.message_user(request, f"Erased a person: {_said(report)}.", messages.SUCCESS)
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Erase people",
        "people": people,
        "left_out": queryset.count() - len(people),
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "opts": modeladmin.model._meta,
    }
    return TemplateResponse(request, "admin/privacy_app/erase_confirmation.html", context)


def _said(report: dict[str, int]) -> str:
    return ", ".join(f"{count} {what}" for what, count in report.items() if count) or "nothing"


def _may_keep(request: HttpRequest) -> bool:
    return request.user.has_perm("sessions_app.change_session")


def _may_erase(request: HttpRequest) -> bool:
    return request.user.has_perm("sessions_app.delete_user")


def install() -> None:
    add_action(Session, Action(keep_sessions, _may_keep))
    add_action(Session, Action(stop_keeping_sessions, _may_keep))
    add_action(User, Action(erase_people, _may_erase))

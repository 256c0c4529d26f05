"""An agent's versions in the admin: listed on its page, two compared field by field, a draft
made from the live configuration, a draft promoted. The rights are the API's, asked through the
same gates (services.versions): viewing takes the “view agent” permission, drafting and
promoting the “change agent” one."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.admin import helpers
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.template.response import TemplateResponse
from django.urls import path, reverse

from sessions_app.admin import display
from sessions_app.models import VERSIONED_FIELDS, Agent, AgentVersion, Run
from sessions_app.services import versions
from sessions_app.services.access import NotFound
from sessions_app.services.permissions import staff_may

URL = "sessions_app_agent"
TEMPLATES = "admin/sessions_app/agent/"
# A text longer than this, or of several lines, is compared line by line.
SHORT_TEXT = 80
CONTEXT_LINES = 3  # unchanged lines shown around each change of a long text


def _gated(gate: Callable[..., Any], *args: Any) -> Any:
    """The service's gate, its NotFound as the admin's 404 (PermissionDenied is the admin's 403)."""
    try:
        return gate(*args)
    except NotFound as exc:
        raise Http404 from exc


def compare_url(agent_id: Any, a: AgentVersion, b: AgentVersion) -> str:
    url = reverse(f"admin:{URL}_versions_compare", args=[agent_id])
    return f"{url}?a={a.pk}&b={b.pk}"


def _agent_url(agent_id: Any) -> str:
    return display.change_url(Agent, agent_id) + "#versions"


# -- what a diff shows -------------------------------------------------------------------------


def shown(name: str, value: Any) -> str:
    """A versioned field's value as staff read it."""
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    field = Agent._meta.get_field(name)
    if field.is_relation:  # the few-shot dataset, by name: its app is not named here
        found = field.related_model._default_manager.filter(pk=value).first()
        return str(found) if found is not None else f"{value} (deleted)"
    return str(value)


def _long(value: Any) -> bool:
    return isinstance(value, str) and ("\n" in value or len(value) > SHORT_TEXT)


def line_diff(before: str, after: str) -> list[tuple[str, str]]:
    """(kind, line) of a unified diff without its header: kind is "added", "removed", "same"
    or "gap" (lines left out between two changes)."""
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), lineterm="", n=CONTEXT_LINES
    )
    kinds = {"+": "added", "-": "removed", "@": "gap"}
    rows = []
    for line in list(lines)[2:]:  # past "--- " and "+++ "
        kind = kinds.get(line[:1], "same")
        rows.append((kind, "" if kind == "gap" else line[1:]))
    return rows


def diff_rows(a: AgentVersion, b: AgentVersion) -> list[dict[str, Any]]:
    """Each field that differs from `a` to `b`; a long text also as its changed lines."""
    rows = []
    for name, before, after in versions.diff(a, b):
        row = {"field": name, "before": shown(name, before), "after": shown(name, after)}
        row["lines"] = []
        if _long(before) or _long(after):
            row["lines"] = line_diff(str(before or ""), str(after or ""))
        rows.append(row)
    return rows


# -- the agent's page ---------------------------------------------------------------------------


def listing(request: HttpRequest, agent: Agent) -> dict[str, Any]:
    """The versions table of an agent's page, newest first, and where its links lead."""
    ordered = list(versions.with_run_counts(agent.versions.all()).order_by("-number"))
    may_change = staff_may(request.user, "change", Agent)
    rows = []
    for version, older in zip(ordered, [*ordered[1:], None], strict=True):
        runs = display.changelist_url(
            Run, agent__agent_id__exact=agent.pk, agent_version=version.pk
        )
        promote = reverse(f"admin:{URL}_version_promote", args=[agent.pk, version.pk])
        rows.append(
            {
                "version": version,
                "state": versions.state(version),
                "runs_url": runs,
                "diff_url": compare_url(agent.pk, older, version) if older else "",
                "promote_url": promote if may_change and version.is_draft else "",
            }
        )
    return {
        "versions": rows,
        "draft_url": reverse(f"admin:{URL}_version_draft", args=[agent.pk]) if may_change else "",
        "compare_url": reverse(f"admin:{URL}_versions_compare", args=[agent.pk]),
    }


def _chosen(
    choices: list[AgentVersion], query: QueryDict
) -> tuple[AgentVersion | None, AgentVersion | None]:
    """The two versions asked for; by default the newest and the one before it."""
    by_id = {str(v.pk): v for v in choices}
    b = by_id.get(query.get("b", "")) or (choices[0] if choices else None)
    older = [v for v in choices if b is not None and v.number < b.number]
    a = by_id.get(query.get("a", "")) or (older[0] if older else b)
    return a, b


def _drafted_message(version: AgentVersion, made: bool, live_id: Any) -> tuple[int, str]:
    number = version.number
    if made:
        return messages.SUCCESS, f"Draft version {number} saved: users chat with the live one."
    if version.pk == live_id:
        return messages.INFO, f"That is the live configuration, version {number}: no draft made."
    return messages.INFO, f"That configuration is version {number} already: no draft made."


class VersionPages:
    """Mixed into the agent's ModelAdmin: the pages of its versions."""

    admin_site: Any
    form: type[forms.ModelForm]
    media: forms.Media

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        own = [
            path(
                "<uuid:agent_id>/versions/compare/",
                wrap(self.compare_view),
                name=f"{URL}_versions_compare",
            ),
            path(
                "<uuid:agent_id>/versions/new/", wrap(self.draft_view), name=f"{URL}_version_draft"
            ),
            path(
                "<uuid:agent_id>/versions/<uuid:version_id>/promote/",
                wrap(self.promote_view),
                name=f"{URL}_version_promote",
            ),
        ]
        return [*own, *super().get_urls()]  # type: ignore[misc]

    def _page(
        self, request: HttpRequest, agent: Agent, title: str, **context: Any
    ) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": Agent._meta,
            "agent": agent,
            "agent_url": _agent_url(agent.pk),
            "title": title,
            **context,
        }

    def compare_view(self, request: HttpRequest, agent_id: Any) -> HttpResponse:
        agent = _gated(versions.agent_for_user, request.user, agent_id)
        choices = list(agent.versions.order_by("-number"))
        for version in choices:  # which users chat with, which are drafts: said on the page
            version.state = versions.state(version)  # type: ignore[attr-defined]
            version.named = f"v{version.number} ({version.state})"  # type: ignore[attr-defined]
        a, b = _chosen(choices, request.GET)
        rows = diff_rows(a, b) if a is not None and b is not None else []
        live = next((v for v in choices if v.state == "live"), None)  # type: ignore[attr-defined]
        context = self._page(request, agent, f"Compare versions of {agent}", choices=choices)
        context.update(a=a, b=b, rows=rows, live=live)
        return TemplateResponse(request, f"{TEMPLATES}version_compare.html", context)

    def promote_view(self, request: HttpRequest, agent_id: Any, version_id: Any) -> HttpResponse:
        version = _gated(
            versions.get_version_for_user, request.user, agent_id, version_id, "change"
        )
        agent = version.agent
        if version.pk == agent.live_version_id:
            messages.info(request, f"Version {version.number} is the live version already.")
            return HttpResponseRedirect(_agent_url(agent.pk))
        if request.method == "POST":
            return self._promote(request, version)
        live = agent.live_version
        rows = diff_rows(live, version) if live is not None else []
        title = f"Promote {version.label} of {agent}"
        context = self._page(request, agent, title, version=version, live=live, rows=rows)
        return TemplateResponse(request, f"{TEMPLATES}version_promote.html", context)

    def _promote(self, request: HttpRequest, version: AgentVersion) -> HttpResponse:
        try:
            versions.promote(version, request.user)
        except ValueError as exc:  # the configuration is refused now (its dataset changed)
            messages.error(request, f"Version {version.number} was not promoted: {exc}")
        else:
            messages.success(
                request, f"Version {version.number} is live: users chat with it from now on."
            )
        return HttpResponseRedirect(_agent_url(version.agent_id))

    def draft_view(self, request: HttpRequest, agent_id: Any) -> HttpResponse:
        agent = _gated(versions.agent_for_user, request.user, agent_id, "change")
        note = forms.CharField(
            max_length=200,
            required=False,
            help_text="What this version tries, for whoever reads the list.",
        )
        form_class = self.get_form(  # type: ignore[attr-defined]
            request,
            agent,
            change=True,
            fields=list(VERSIONED_FIELDS),
            form=type("DraftForm", (self.form,), {"note": note}),
        )
        # The form only reads the agent: a draft never changes what users chat with.
        form = form_class(request.POST if request.method == "POST" else None, instance=agent)
        if form.is_bound and form.is_valid() and self._drafted(request, agent, form):
            return HttpResponseRedirect(_agent_url(agent.pk))
        fieldsets = self._draft_fieldsets(request, agent)
        adminform = helpers.AdminForm(form, fieldsets, {}, model_admin=self)
        context = self._page(request, agent, f"New draft version of {agent}", adminform=adminform)
        context.update(errors=helpers.AdminErrorList(form, []), media=self.media + adminform.media)
        return TemplateResponse(request, f"{TEMPLATES}version_draft.html", context)

    def _drafted(self, request: HttpRequest, agent: Agent, form: forms.ModelForm) -> bool:
        data = form.cleaned_data
        changes = {name: data[name] for name in VERSIONED_FIELDS if name in data}
        try:
            version, made = versions.draft(agent, changes, request.user, data["note"])
        except ValueError as exc:  # what the form cannot see: a change since it was checked
            form.add_error(None, str(exc))
            return False
        messages.add_message(request, *_drafted_message(version, made, agent.live_version_id))
        return True

    def _draft_fieldsets(self, request: HttpRequest, agent: Agent) -> list[Any]:
        """The agent form's fieldsets, with only the versioned fields, after the note."""
        kept: list[Any] = [(None, {"fields": ["note"]})]
        for title, options in self.get_fieldsets(request, agent):  # type: ignore[attr-defined]
            fields = [name for name in options["fields"] if name in VERSIONED_FIELDS]
            if fields:
                kept.append((title, {**options, "fields": fields}))
        return kept

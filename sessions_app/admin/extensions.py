"""What other apps add to this app's admin pages without this app naming them: actions, filters
and columns on the session and run lists, panels on a session's transcript and a run's page, and
sections of the agent's form. Filled as those apps' admin modules load (admin autodiscovery, at
start-up); read on every request, so the ModelAdmins here never import them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.contrib.admin.options import IS_POPUP_VAR
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db.models import Model
from django.http import HttpRequest

# The places of a page where a panel's templates are drawn.
SLOTS = {
    # A session's page: atop its transcript, in each run of it, after the page's own form.
    "session": ("transcript", "transcript_run", "end"),
    # A run's page: a section before its messages, after the page's own form.
    "run": ("body", "end"),
}


@dataclass(frozen=True)
class Action:
    function: Callable[..., Any]  # an admin action, as ModelAdmin.actions lists them
    allowed: Callable[[HttpRequest], bool]  # whether the list offers it to this request


@dataclass(frozen=True)
class ListFilter:
    list_filter: Any  # a filter as ModelAdmin.list_filter lists them (a SimpleListFilter class)
    allowed: Callable[[HttpRequest], bool]  # whether the list offers it to this request


@dataclass(frozen=True)
class ListColumn:
    """A column of a model's list: `make(request)` gives it for one request's list, a callable
    as list_display takes them (named `__name__`, headed by its `short_description`, as
    admin.display sets them) with a method `load(rows)`, called once with the page's rows
    before any is drawn, so that it reads what it shows for them all at once."""

    make: Callable[[HttpRequest], Any]
    allowed: Callable[[HttpRequest], bool]  # whether the list shows it to this request


@dataclass(frozen=True)
class Panel:
    """What a panel adds to the page's context (the session page's context gets the request and
    the transcript's entries; the run page's the request and the run), and the template it draws
    at each slot."""

    context: Callable[..., dict[str, Any]]
    templates: Mapping[str, str]


@dataclass(frozen=True)
class FormSection:
    """A fieldset of a model's admin form owned by another app: its fields (taken out of the
    main fieldset), what it says, their help texts, and a check of each field's cleaned value
    that raises ValidationError, shown on the field."""

    title: str
    fields: tuple[str, ...]
    description: str = ""
    help_texts: Mapping[str, str] = field(default_factory=dict)
    checks: Mapping[str, Callable[[Any], None]] = field(default_factory=dict)


_actions: dict[type[Model], list[Action]] = {}
_list_filters: dict[type[Model], list[ListFilter]] = {}
_list_columns: dict[type[Model], list[ListColumn]] = {}
_panels: dict[str, list[Panel]] = {page: [] for page in SLOTS}
_sections: dict[type[Model], list[FormSection]] = {}


# Adding the same thing twice adds it once.


def add_action(model: type[Model], action: Action) -> None:
    _add(_actions.setdefault(model, []), action)


def add_list_filter(model: type[Model], list_filter: ListFilter) -> None:
    _add(_list_filters.setdefault(model, []), list_filter)


def add_list_column(model: type[Model], column: ListColumn) -> None:
    _add(_list_columns.setdefault(model, []), column)


def add_panel(page: str, panel: Panel) -> None:
    unknown = set(panel.templates) - set(SLOTS[page])
    if unknown:
        raise ImproperlyConfigured(f"The {page} page has no slot {', '.join(sorted(unknown))}.")
    _add(_panels[page], panel)


def add_form_section(model: type[Model], section: FormSection) -> None:
    _add(_sections.setdefault(model, []), section)


def _add(registry: list[Any], entry: Any) -> None:
    if entry not in registry:
        registry.append(entry)


def form_sections(model: type[Model]) -> list[FormSection]:
    return list(_sections.get(model, ()))


def panel_context(page: str, request: HttpRequest, *args: Any) -> dict[str, Any]:
    """The panels' context for one page, and `panels`: each slot's template names."""
    context: dict[str, Any] = {}
    slots: dict[str, list[str]] = {slot: [] for slot in SLOTS[page]}
    for panel in _panels[page]:
        context.update(panel.context(request, *args))
        for slot, template in panel.templates.items():
            slots[slot].append(template)
    context["panels"] = slots
    return context


class ExtraActions:
    """Mixed into a ModelAdmin: its list offers, after its own, the actions other apps added for
    its model, to the requests each allows."""

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions: dict[str, Any] = super().get_actions(request)  # type: ignore[misc]
        if self.actions is None or IS_POPUP_VAR in request.GET:  # type: ignore[attr-defined]
            return actions
        for extra in _actions.get(self.model, ()):  # type: ignore[attr-defined]
            if extra.allowed(request):
                name = extra.function.__name__
                description = getattr(extra.function, "short_description", name)
                actions[name] = (extra.function, name, description)
        return actions


class ExtraListFilters:
    """Mixed into a ModelAdmin: its list's filters, after its own, are those other apps added
    for its model, to the requests each allows."""

    def get_list_filter(self, request: HttpRequest) -> list[Any]:
        filters = list(super().get_list_filter(request))  # type: ignore[misc]
        for extra in _list_filters.get(self.model, ()):  # type: ignore[attr-defined]
            if extra.allowed(request):
                filters.append(extra.list_filter)
        return filters


class ExtraListColumns:
    """Mixed into a ModelAdmin: its list's columns, after its own, are those other apps added
    for its model, to the requests each allows, each loaded once per page."""

    def get_list_display(self, request: HttpRequest) -> list[Any]:
        columns = list(super().get_list_display(request))  # type: ignore[misc]
        for extra in _list_columns.get(self.model, ()):  # type: ignore[attr-defined]
            if extra.allowed(request):
                columns.append(extra.make(request))
        return columns

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return LoadingChangeList


class LoadingChangeList(ChangeList):
    """A list whose columns with a `load` read what they show for the page's rows together."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        rows = list(self.result_list)  # read once; the page draws these same rows
        for column in self.list_display:
            if callable(getattr(column, "load", None)):
                column.load(rows)


class SectionChecks:
    """Mixed into a ModelForm: the help texts and checks of the model's FormSections."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for section in form_sections(self._meta.model):  # type: ignore[attr-defined]
            for name, text in section.help_texts.items():
                if name in self.fields:  # type: ignore[attr-defined]
                    self.fields[name].help_text = text  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean()  # type: ignore[misc]
        for section in form_sections(self._meta.model):  # type: ignore[attr-defined]
            for name, check in section.checks.items():
                if name not in data:
                    continue
                try:
                    check(data[name])
                except ValidationError as exc:
                    self.add_error(name, exc)  # type: ignore[attr-defined]
        return data

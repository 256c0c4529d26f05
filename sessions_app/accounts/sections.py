"""What other apps add to a user's settings page without this app naming them (budgets, share
links): a section each, its template and what it shows to the person viewing it. Filled as
those apps load (their AppConfig.ready); read on every view."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest


@dataclass(frozen=True)
class Section:
    key: str
    template: str
    # Its template's context for this request; None leaves the section out.
    context: Callable[[HttpRequest], dict[str, Any] | None]


_sections: list[Section] = []


def add_settings_section(section: Section) -> None:
    """Adding a section with the same key again replaces it."""
    _sections[:] = [s for s in _sections if s.key != section.key] + [section]


def sections_for(request: HttpRequest) -> list[tuple[str, dict[str, Any]]]:
    """(template, context) of each section this request is shown, in the order they were added."""
    shown = []
    for section in _sections:
        context = section.context(request)
        if context is not None:
            shown.append((section.template, context))
    return shown

"""The one way the experiment's own admin pages fetch it: the admin's permission on experiments
first (403 whether or not it exists, as Django's own pages answer), then the experiment."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest

from datasets_app.services import catalog
from evals_app.models import Experiment
from sessions_app.models import Agent
from sessions_app.services.permissions import staff_may

Right = Literal["view", "add", "change", "delete", "rate"]


def may(request: HttpRequest, right: Right, obj: Experiment | None = None) -> bool:
    model_admin = admin.site.get_model_admin(Experiment)
    if right == "add":
        return bool(model_admin.has_add_permission(request))
    if right == "rate":  # people judging answers blind need not run or change experiments
        return model_admin.has_view_permission(request, obj) and request.user.has_perm(
            "evals_app.rate_experiment"
        )
    check = getattr(model_admin, f"has_{right}_permission")
    return bool(check(request, obj))


def may_read_items(request: HttpRequest) -> bool:
    """Whether the pages may show the dataset items' conversations: only to staff who may read
    them in the datasets' own admin too."""
    return catalog.may(request.user, catalog.READ + catalog.READ_ITEMS)


def may_read_agents(request: HttpRequest) -> bool:
    return staff_may(request.user, "view", Agent)


def experiment_for(
    request: HttpRequest, experiment_id: Any, right: Right = "view", *, items: bool = False
) -> Experiment:
    """`items`: the page shows items' conversations (may_read_items)."""
    if not may(request, right) or (items and not may_read_items(request)):
        raise PermissionDenied
    try:
        pk = uuid.UUID(str(experiment_id))
        return Experiment.objects.select_related(
            "dataset", "baseline__agent", "judge", "created_by"
        ).get(pk=pk)
    except (ValueError, Experiment.DoesNotExist) as exc:
        raise Http404("No such experiment.") from exc

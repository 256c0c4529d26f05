"""What live evaluation adds to the chat app's run admin, through its extension points
(sessions_app.admin.extensions): the run list filtered by score and a column of each run's
scores, and a run's scores on its page. All for staff who may view scores."""

from __future__ import annotations

import re
from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html_join
from django.utils.safestring import SafeString, mark_safe

from evals_app.models import EvalRule, Score
from evals_app.scorer_labels import label_of, label_of_key, labels_of
from evals_app.scorers import REGISTRY, spec_key
from sessions_app.admin.display import EMPTY
from sessions_app.admin.extensions import (
    ListColumn,
    ListFilter,
    Panel,
    add_list_column,
    add_list_filter,
    add_panel,
)
from sessions_app.models import Run

SCORED, UNSCORED = "any", "none"
# Each kind of scorer in a word, for the run list's narrow column (its title says it in full).
SHORT = {
    "exact": "Exact",
    "contains": "Contains",
    "regex": "Regex",
    "json_valid": "JSON",
    "json_equal": "JSON equal",
    "similarity": "Similarity",
    "judge": "Judge",
    "pairwise": "Pairwise",
}
# "<key><0.5", "<key>>=0.5" or "<key>!" (failed): see LiveScoreFilter.lookups.
CHOICE = re.compile(r"(?P<key>.+?)(?:(?P<op><|>=)(?P<at>-?\d+(?:\.\d+)?)|(?P<failed>!))")


def may_view_scores(request: HttpRequest) -> bool:
    return request.user.has_perm("evals_app.view_score")


def rule_specs() -> dict[str, Any]:
    """The scorers of every evaluation rule, by key: the specs live scores come from."""
    return {
        spec_key(spec): spec
        for scorers in EvalRule.objects.values_list("scorers", flat=True)
        for spec in scorers or []
    }


def scale(key: str, spec: Any = None) -> tuple[float, float]:
    """The scale of the scorer a key names (0 to 1 for most), its spec's own when it gives one
    (a judge's "scale")."""
    low, high = getattr(REGISTRY.get(key.partition(":")[0]), "scale", (0.0, 1.0))
    given = spec.get("scale") if isinstance(spec, dict) else None
    if isinstance(given, list | tuple) and len(given) == 2:
        low, high = given
    return low, high


def middle(key: str, spec: Any = None) -> float:
    """The middle of the scale of the scorer a key names (0.5 for the scorers from 0 to 1)."""
    low, high = scale(key, spec)
    return (low + high) / 2


class LiveScoreFilter(admin.SimpleListFilter):
    """Runs by their live scores: scored or not, and per scorer key scored so far, below or
    above the middle of its scale, or failed."""

    title = "live score"
    parameter_name = "score"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        # The rules' scorers, not a DISTINCT over every live score on each load of the list.
        specs = rule_specs()
        choices = [(SCORED, "Scored"), (UNSCORED, "Not scored")]
        labels = {key: label_of(spec) for key, spec in specs.items()}
        for key in sorted(specs, key=lambda key: (labels[key], key)):
            at, label = f"{middle(key, specs[key]):g}", labels[key]
            choices += [
                (f"{key}<{at}", f"{label}: below {at}"),
                (f"{key}>={at}", f"{label}: {at} or above"),
                (f"{key}!", f"{label}: failed"),
            ]
        return choices

    def queryset(self, request: HttpRequest, queryset: QuerySet[Run]) -> QuerySet[Run] | None:
        value = self.value()
        if not value:
            return None
        scores = Score.objects.filter(run__isnull=False)
        if value == SCORED:
            return queryset.filter(pk__in=scores.values("run_id"))
        if value == UNSCORED:
            return queryset.exclude(pk__in=scores.values("run_id"))
        found = CHOICE.fullmatch(value)
        if found is None:
            raise IncorrectLookupParameters(f"No such score filter: {value}")
        scores = scores.filter(scorer=found["key"])
        if found["failed"]:
            scores = scores.filter(value__isnull=True)
        elif found["op"] == "<":
            scores = scores.filter(value__lt=float(found["at"]))
        else:
            scores = scores.filter(value__gte=float(found["at"]))
        return queryset.filter(pk__in=scores.values("run_id"))


class LiveScoresColumn:
    """The run list's column of each run's live scores, compact ("Judge 4/5", "Contains ✓"),
    each titled with its scorer in words and its key. A page's scores are read in one query,
    the rules' scorers (their words and scales) in another."""

    __name__ = "live_scores"
    short_description = "live scores"

    def __init__(self) -> None:
        self.scores: dict[Any, list[tuple[str, float | None]]] = {}
        self.specs: dict[str, Any] = {}
        self.labels: dict[str, str] = {}

    def load(self, runs: list[Run]) -> None:
        rows = (
            Score.objects.filter(run_id__in=[run.pk for run in runs])
            .order_by("scorer", "pk")
            .values_list("run_id", "scorer", "value")
        )
        for run_id, key, value in rows:
            self.scores.setdefault(run_id, []).append((key, value))
        if self.scores:
            self.specs = rule_specs()
            self.labels = labels_of(self.specs.values())

    def __call__(self, run: Run) -> SafeString | str:
        scores = self.scores.get(run.pk)
        if not scores:
            return EMPTY
        return format_html_join(
            # One score a line, each kept whole: the list has no width to spare.
            mark_safe("<br>"),
            '<span title="{} ({})">{}&nbsp;{}</span>',
            (
                (label_of_key(key, self.labels), key, _kind(key), self._value(key, value))
                for key, value in scores
            ),
        )

    def _value(self, key: str, value: float | None) -> str:
        """✓ or ✗ on a scale of 0 to 1 (most are pass or fail), else the value of the top of
        its scale when its spec says what that is."""
        if value is None:
            return "failed"
        spec = self.specs.get(key)
        low, high = scale(key, spec)
        if (low, high) == (0.0, 1.0) and value in (0.0, 1.0):
            return "✓" if value else "✗"
        if (low, high) == (0.0, 1.0):
            return f"{value:.2f}"
        # A judge's options may change its scale: one no rule names any more is unknown.
        return f"{value:g}/{high:g}" if spec is not None or ":" not in key else f"{value:g}"


def _kind(key: str) -> str:
    """The scorer's kind in a word ("Contains"), its options left to the title."""
    name = key.partition(":")[0]
    scorer = REGISTRY.get(name)
    return SHORT.get(name) or (scorer.label if scorer is not None else name)


def run_context(request: HttpRequest, run: Run) -> dict[str, Any]:
    """A run's live scores, each with its scorer's label; None for staff who may not see them."""
    if not may_view_scores(request):
        return {"live_scores": None}
    scores = list(
        Score.objects.filter(run=run).select_related("judge_version__agent").order_by("scorer")
    )
    rules = EvalRule.objects.filter(agent_id=run.agent_id).values_list("scorers", flat=True)
    labels = labels_of(spec for scorers in rules for spec in scorers or [])
    for score in scores:
        score.label = label_of_key(score.scorer, labels)
    ruled = EvalRule.objects.filter(agent_id=run.agent_id, active=True).exists()
    return {"live_scores": scores, "live_ruled": ruled}


def _live_scores_column(request: HttpRequest) -> LiveScoresColumn:
    return LiveScoresColumn()


def install() -> None:
    """Called once, as this app's admin modules load."""
    add_list_filter(Run, ListFilter(LiveScoreFilter, may_view_scores))
    add_list_column(Run, ListColumn(_live_scores_column, may_view_scores))
    add_panel("run", Panel(run_context, {"body": "admin/evals_app/panels/run_scores.html"}))

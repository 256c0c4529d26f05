"""Evaluation rules in the admin: per agent, which completed runs are scored in the background
(a sample, and those rated down) and by which scorers, chosen with checkboxes and their options,
each checked by building it as the scoring will."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from evals_app.models import EvalRule
from evals_app.scorers import REGISTRY, SpecError, build

OPTIONS_HELP = (
    "The options of the chosen scorers, by name, as JSON: e.g. "
    '{"regex": {"pattern": "\\\\d+", "flags": "i"}, "contains": {"text": "sorry"}}. '
    "A live run has no reference answer: “contains” needs its text here."
)
# Scorers that compare with a reference answer, which can score a live run once an option
# stands in for it.
STAND_IN = {"contains": "text"}


def live_refusal(name: str) -> str | None:
    """Why the scorer cannot score a live run whatever its options (as scoring would find out,
    evals_app.scoring._for_a_run); None when it can."""
    scorer = REGISTRY.get(name)
    if scorer is None:
        return f"There is no scorer “{name}”."
    if scorer.pairwise:
        return f"{scorer.label} compares with the baseline's answer, and a live run has none."
    if scorer.needs_reference and name not in STAND_IN:
        return f"{scorer.label} compares with a reference answer, and a live run has none."
    return None


def scorer_choices() -> list[tuple[str, str]]:
    """The scorers that can score a live run, asked each time a form is made, so scorers
    registered later are offered too."""
    return [
        (name, scorer.label + (f" (give its “{STAND_IN[name]}” below)" if name in STAND_IN else ""))
        for name, scorer in sorted(REGISTRY.items())
        if live_refusal(name) is None
    ]


class LiveScorers(forms.MultipleChoiceField):
    """A scorer posted that cannot score a live run is refused saying why, not as an unknown
    choice."""

    def validate(self, value: Any) -> None:
        refused = [why for name in value or () if (why := live_refusal(str(name)))]
        if refused:
            raise forms.ValidationError(refused)
        super().validate(value)


class RuleForm(forms.ModelForm):
    chosen = LiveScorers(
        label="Scorers", choices=scorer_choices, widget=forms.CheckboxSelectMultiple
    )
    options = forms.JSONField(
        required=False,
        initial=dict,
        help_text=OPTIONS_HELP,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80}),
    )

    class Meta:
        model = EvalRule
        fields = ["agent", "sample_percent", "rated_down", "judge", "active"]
        help_texts = {
            "sample_percent": "Of the agent's completed runs, drawn by run id: the same runs "
            "in every process. 0: none (with “rated down”, only those).",
            "judge": "The agent that judges, for the judge scorers.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.specs: list[dict[str, Any]] = []
        if not self.is_bound and self.instance.pk:
            specs = [{"name": s} if isinstance(s, str) else s for s in self.instance.scorers]
            self.initial["chosen"] = [spec.get("name") for spec in specs]
            self.initial["options"] = {
                spec["name"]: {k: v for k, v in spec.items() if k != "name"}
                for spec in specs
                if len(spec) > 1
            }

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        options = data.get("options") or {}
        if not isinstance(options, dict) or not all(isinstance(v, dict) for v in options.values()):
            self.add_error("options", "Give an object of each scorer's options, by its name.")
            return data
        chosen = data.get("chosen") or []
        stray = sorted(set(options) - set(chosen))
        if stray:
            self.add_error("options", f"Options of scorers not chosen: {', '.join(stray)}.")
        self.specs = [spec for name in chosen if (spec := self._spec(name, options, data))]
        return data

    def _spec(self, name: str, options: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        """The scorer's spec, once it builds and can score a live run; else {} and the error."""
        spec = {"name": name, **options.get(name, {})}
        judge = data.get("judge")
        if REGISTRY[name].needs_judge and judge is None:
            self.add_error("judge", f"The {name} scorer needs a judge agent.")
            return {}
        try:
            scorer = build(spec, judge)
        except SpecError as exc:
            self.add_error("options", str(exc))
            return {}
        if scorer.needs_reference:
            self.add_error("chosen", f"{scorer.label} compares with a reference answer, and a "
                           "live run has none: give it one in its options.")  # fmt: skip
            return {}
        return spec

    def save(self, commit: bool = True) -> EvalRule:
        self.instance.scorers = self.specs
        return super().save(commit)


@admin.register(EvalRule)
class EvalRuleAdmin(admin.ModelAdmin):
    form = RuleForm
    list_display = [
        "agent", "sample", "rated_down", "scorer_names", "judge", "active", "created_by",
        "created_at",
    ]  # fmt: skip
    list_filter = ["active", "rated_down", "agent"]
    list_select_related = ["agent", "judge", "created_by"]
    fields = ["agent", "sample_percent", "rated_down", "chosen", "options", "judge", "active"]

    @admin.display(description="sample", ordering="sample_percent")
    def sample(self, obj: EvalRule) -> str:
        return f"{obj.sample_percent} %"

    @admin.display(description="scorers")
    def scorer_names(self, obj: EvalRule) -> str:
        return ", ".join(s if isinstance(s, str) else str(s.get("name")) for s in obj.scorers)

    def save_model(self, request: HttpRequest, obj: EvalRule, form: Any, change: bool) -> None:
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

"""The forms of the experiment pages: starting one, scoring it again, sending an answer to a
dataset, and a person's blind verdict. They gather input; whether an experiment can run is
`create_experiment`'s to say, and what it refuses shows on the form."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from datasets_app.models import Dataset, Split
from evals_app.blind import SHOWN_CHOICES
from sessions_app.models import Agent, AgentVersion

# The scorers staff choose from, each spec's name and what it does.
SCORERS = [
    ("exact", "Exact match with the reference answer"),
    ("contains", "Contains the reference answer"),
    ("regex", "Matches a regular expression (give the pattern)"),
    ("json_valid", "Valid JSON"),
    ("json_equal", "The same JSON value as the reference"),
    ("similarity", "Similarity to the reference (words in order)"),
    ("judge", "An LLM judge with a rubric (give the rubric and scale, and a judge agent)"),
    ("pairwise", "A pairwise judge: each candidate against the baseline, in both orders"),
]


class VersionChoice(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: AgentVersion) -> str:
        return str(obj)  # "Agent v3 (draft)"


class OneVersion(forms.ModelChoiceField):
    def label_from_instance(self, obj: AgentVersion) -> str:
        return str(obj)


def _versions() -> Any:
    return AgentVersion.objects.select_related("agent").order_by("agent__name", "number")


class ScorerForm(forms.Form):
    scorers = forms.MultipleChoiceField(
        choices=SCORERS, widget=forms.CheckboxSelectMultiple, required=False
    )
    pattern = forms.CharField(
        required=False, max_length=500, label="Pattern", help_text="For the regular expression."
    )
    rubric = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80}),
        help_text="For the judge: what makes an answer good, and what each score means.",
    )
    scale_low = forms.IntegerField(initial=1, label="Scale from")
    scale_high = forms.IntegerField(initial=5, label="to")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        low, high = data.get("scale_low"), data.get("scale_high")
        if low is not None and high is not None and low >= high:
            self.add_error("scale_high", "The top of the scale must be above its bottom.")
        return data

    def specs(self) -> list[dict[str, Any]]:
        """The chosen scorers as specs, each with the options it takes."""
        data = self.cleaned_data
        options: dict[str, dict[str, Any]] = {
            "regex": {"pattern": data["pattern"]},
            "judge": {"rubric": data["rubric"], "scale": [data["scale_low"], data["scale_high"]]},
        }
        return [{"name": name, **options.get(name, {})} for name in data["scorers"]]


class StartForm(ScorerForm):
    name = forms.CharField(required=False, max_length=200)
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.only("dataset_id", "name"))
    split = forms.ChoiceField(
        choices=[("", "every split"), *Split.choices], required=False, initial=""
    )
    versions = VersionChoice(
        queryset=_versions(),
        widget=forms.SelectMultiple(attrs={"size": 8}),
        help_text="Two or more, drafts included; the baseline is one of them.",
    )
    baseline = OneVersion(queryset=_versions())
    repeats = forms.IntegerField(min_value=1, max_value=5, initial=1)
    judge = forms.ModelChoiceField(
        queryset=Agent.objects.only("agent_id", "name"),
        required=False,
        help_text="The agent that judges, for the judge scorers.",
    )
    concurrency = forms.IntegerField(
        min_value=1, max_value=100, required=False, help_text="Answers asked for at once."
    )
    budget_tokens = forms.IntegerField(
        min_value=1, required=False, label="Token budget", help_text="Stops here; empty: none."
    )
    budget_cost = forms.DecimalField(
        min_value=0, max_digits=12, decimal_places=6, required=False, label="Cost budget (USD)"
    )

    field_order = [
        "name", "dataset", "split", "versions", "baseline", "repeats", "scorers", "pattern",
        "rubric", "scale_low", "scale_high", "judge", "concurrency", "budget_tokens",
        "budget_cost",
    ]  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["concurrency"].initial = settings.PARLEY_EVAL_CONCURRENCY

    def arguments(self) -> dict[str, Any]:
        """What create_experiment is given."""
        data = self.cleaned_data
        return {
            "dataset": data["dataset"],
            "versions": list(data["versions"]),
            "baseline": data["baseline"],
            "repeats": data["repeats"],
            "scorers": self.specs(),
            "judge": data["judge"],
            "split": data["split"],
            "concurrency": data["concurrency"],
            "budget_tokens": data["budget_tokens"],
            "budget_cost": data["budget_cost"],
            "name": data["name"].strip(),
        }


class SendForm(forms.Form):
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.only("dataset_id", "name"))


class RateForm(forms.Form):
    pair = forms.UUIDField(widget=forms.HiddenInput)
    choice = forms.ChoiceField(choices=[(c, c) for c in SHOWN_CHOICES])
    comment = forms.CharField(required=False, max_length=2000, widget=forms.Textarea)

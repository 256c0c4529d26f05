"""The forms of the experiment pages: starting one, scoring it again, sending an answer to a
dataset, and a person's blind verdict. They gather input; whether an experiment can run is
`create_experiment`'s to say, and what it refuses shows on the form."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from datasets_app.models import Dataset, Split
from evals_app.blind import SHOWN_CHOICES
from evals_app.scorers import SpecError, build
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


# The scorers that ask a judge agent, and the field each one's own options are given in.
JUDGED = {"judge", "pairwise"}
JUDGED_LABELS = [("judge", "LLM judge"), ("pairwise", "pairwise judge")]
OPTION_FIELDS = {"regex": "pattern", "judge": "rubric"}
EMBEDDED_CONCURRENCY = 2


class VersionChoice(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: AgentVersion) -> str:
        return str(obj)  # "Agent v3 (draft)"


class OneVersion(forms.ModelChoiceField):
    def label_from_instance(self, obj: AgentVersion) -> str:
        return str(obj)


def on_embedded_model() -> bool:
    """Whether answers come from the embedded model (no endpoint configured, or the one
    `serve` started), which answers only a few requests at once."""
    return bool(settings.LLM_EMBEDDED or not settings.LLM_BASE_URL)


def default_concurrency() -> int:
    """PARLEY_EVAL_CONCURRENCY; on the embedded model at most EMBEDDED_CONCURRENCY, as more
    answers at once would only wait in its queue (and time out there)."""
    configured = settings.PARLEY_EVAL_CONCURRENCY
    return min(configured, EMBEDDED_CONCURRENCY) if on_embedded_model() else configured


def _versions() -> Any:
    return AgentVersion.objects.select_related("agent").order_by("agent__name", "number")


def _judges() -> Any:
    return Agent.objects.only("agent_id", "name").order_by("name")


class ScorerForm(forms.Form):
    """The scorers chosen and the options each needs; `judge` is the judge agent the
    experiment has already (the start form, and a rescore by staff who may read agents, choose
    one in the form's own field)."""

    scorers = forms.MultipleChoiceField(
        choices=SCORERS, widget=forms.CheckboxSelectMultiple, required=False
    )
    pattern = forms.CharField(
        required=False, max_length=500, label="Pattern", help_text="For the regular expression."
    )
    rubric = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80}),
        help_text="For the LLM judge (and only then needed): what makes an answer good, and "
        "what each score means.",
    )
    scale_low = forms.IntegerField(initial=1, label="Scale from", required=False)
    scale_high = forms.IntegerField(
        initial=5, label="to", required=False, help_text="The LLM judge's scores."
    )

    def __init__(self, *args: Any, judge: Agent | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.current_judge = judge

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        chosen = set(data.get("scorers") or ())
        if "regex" in chosen and not (data.get("pattern") or "").strip():
            self.add_error("pattern", "The regular expression scorer needs a pattern.")
        if "judge" in chosen:
            self._check_judge_options(data)
        if chosen & JUDGED and self._judge(data) is None:
            named = " and ".join(label for name, label in JUDGED_LABELS if name in chosen & JUDGED)
            where = "judge" if "judge" in self.fields else None
            self.add_error(where, f"The {named} asks a judge agent: choose one.")
        if not self.errors:
            self._build_each(data)
        return data

    def _check_judge_options(self, data: dict[str, Any]) -> None:
        if not (data.get("rubric") or "").strip():
            self.add_error(
                "rubric",
                "The LLM judge needs a rubric: say what makes an answer good, and what each "
                "score means.",
            )
        low, high = data.get("scale_low"), data.get("scale_high")
        if low is None or high is None:
            self.add_error("scale_high", "The LLM judge needs its scale, from and to.")
        elif low >= high:
            self.add_error("scale_high", "The top of the scale must be above its bottom.")

    def _judge(self, data: dict[str, Any]) -> Agent | None:
        chosen = data.get("judge") if "judge" in self.fields else None
        return chosen or self.current_judge

    def _build_each(self, data: dict[str, Any]) -> None:
        """Each spec built as the scoring will build it: what it refuses, by the field it is
        about (a regular expression that does not compile, by its pattern)."""
        judge = self._judge(data)
        for spec in self.specs():
            try:
                build(spec, judge)
            except SpecError as exc:
                self.add_error(OPTION_FIELDS.get(spec["name"], "scorers"), str(exc))

    def specs(self) -> list[dict[str, Any]]:
        """The chosen scorers as specs, each with the options it takes."""
        data = self.cleaned_data
        options: dict[str, dict[str, Any]] = {
            "regex": {"pattern": data.get("pattern", "")},
            "judge": {
                "rubric": data.get("rubric", ""),
                "scale": [data.get("scale_low"), data.get("scale_high")],
            },
        }
        return [{"name": name, **options.get(name, {})} for name in data.get("scorers") or ()]


class RescoreForm(ScorerForm):
    """Scoring an experiment again; with `may_choose_judge`, its judge agent can be chosen
    (or changed) too, as the start form chooses it."""

    judge = forms.ModelChoiceField(
        queryset=_judges(),
        required=False,
        help_text="The agent that judges, for the judge scorers. Answers a judge scorer has "
        "scored keep their score: to judge them all again with another judge, change the "
        "rubric or the scale (a changed scorer is a new one).",
    )

    def __init__(self, *args: Any, may_choose_judge: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if may_choose_judge:
            self.fields["judge"].initial = self.current_judge
        else:
            del self.fields["judge"]

    def chosen_judge(self) -> Agent | None:
        """The judge to score with: the one chosen, else the experiment's."""
        return self._judge(self.cleaned_data)


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
        queryset=_judges(),
        required=False,
        help_text="The agent that judges, for the judge scorers.",
    )
    concurrency = forms.IntegerField(
        min_value=1,
        max_value=100,
        required=False,
        help_text="Answers asked for at once; empty: the default shown.",
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
        self.fields["concurrency"].initial = default_concurrency()

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
            "concurrency": data["concurrency"] or default_concurrency(),
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

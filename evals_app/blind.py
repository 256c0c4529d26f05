"""People judging an experiment blind: the answer pairs it offers (a candidate's answer and the
baseline's to the same item and repeat), the order each rater sees a pair in, what they chose,
and the tally per candidate version with the raters' agreement.

A rater sees the two answers as "A" and "B" only. Which one is A is drawn from the experiment's
seed, the rater and the pair, so it differs from pair to pair and rater to rater, yet stays the
same when the page is reloaded; what they chose is stored as baseline, candidate or tie.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Literal

from django.db import IntegrityError, transaction
from django.db.models import OuterRef, QuerySet, Subquery

from evals_app.agreement import fleiss_kappa, percent_agreement
from evals_app.models import Choice, Experiment, HumanVerdict, Trial, TrialStatus
from sessions_app.models import AgentVersion, User
from sessions_app.services.access import NotFound

Shown = Literal["A", "B", "tie"]
SHOWN_CHOICES: tuple[Shown, ...] = ("A", "B", "tie")


@dataclass
class Pair:
    baseline: Trial
    candidate: Trial
    baseline_first: bool

    @property
    def shown(self) -> tuple[Trial, Trial]:
        """The answers as A and B."""
        if self.baseline_first:
            return self.baseline, self.candidate
        return self.candidate, self.baseline

    def choice(self, picked: Shown) -> str:
        if picked == "tie":
            return Choice.TIE
        a_is_baseline = self.baseline_first
        return Choice.BASELINE if (picked == "A") == a_is_baseline else Choice.CANDIDATE


def baseline_first(seed: int, rater_id: Any, baseline_id: Any, candidate_id: Any) -> bool:
    """A fair coin for this rater and pair, the same at every call (no process's hash seed)."""
    text = f"{seed}:{rater_id}:{baseline_id}:{candidate_id}"
    return hashlib.sha256(text.encode()).digest()[0] & 1 == 0


def rateable(experiment: Experiment) -> QuerySet[Trial]:
    """Candidates' completed answers that have the baseline's completed answer beside them,
    each with `baseline_trial_id`; every rater is offered them in the same order, so that
    several people rate the same pairs."""
    baseline = Trial.objects.filter(
        experiment=experiment,
        version_id=experiment.baseline_id,
        item_uuid=OuterRef("item_uuid"),
        repeat=OuterRef("repeat"),
        status=TrialStatus.COMPLETED,
    ).values("pk")[:1]
    candidates = Trial.objects.filter(experiment=experiment, status=TrialStatus.COMPLETED)
    return (
        candidates.exclude(version_id=experiment.baseline_id)
        .annotate(baseline_trial_id=Subquery(baseline))
        .filter(baseline_trial_id__isnull=False)
        .order_by("item_uuid", "repeat", "version_id")
    )


def _pair(experiment: Experiment, rater: User, candidate: Trial) -> Pair:
    annotated = candidate.baseline_trial_id  # type: ignore[attr-defined]  (by rateable)
    base = Trial.objects.select_related("item").get(pk=annotated)
    first = baseline_first(experiment.seed, rater.pk, base.pk, candidate.pk)
    return Pair(base, candidate, first)


def unrated(experiment: Experiment, rater: User) -> QuerySet[Trial]:
    return rateable(experiment).exclude(human_verdicts__rater=rater)


def next_pair(experiment: Experiment, rater: User) -> Pair | None:
    """The first pair this rater has not rated yet."""
    candidate = unrated(experiment, rater).select_related("item").first()
    return None if candidate is None else _pair(experiment, rater, candidate)


def get_pair(experiment: Experiment, rater: User, candidate_trial_id: Any) -> Pair:
    try:
        wanted = uuid.UUID(str(candidate_trial_id))
        candidate = rateable(experiment).select_related("item").get(pk=wanted)
    except (ValueError, Trial.DoesNotExist) as exc:
        raise NotFound from exc
    return _pair(experiment, rater, candidate)


def record(
    experiment: Experiment, rater: User, candidate_trial_id: Any, picked: Shown, comment: str = ""
) -> HumanVerdict:
    """The rater's choice between what they saw as A and B, stored against the versions. A
    pair rated already keeps its first verdict (a form sent twice)."""
    if picked not in SHOWN_CHOICES:
        raise ValueError(f"Choose one of {', '.join(SHOWN_CHOICES)}.")
    pair = get_pair(experiment, rater, candidate_trial_id)
    verdict = HumanVerdict(
        baseline_trial=pair.baseline,
        candidate_trial=pair.candidate,
        rater=rater,
        choice=pair.choice(picked),
        baseline_shown_first=pair.baseline_first,
        comment=comment.strip(),
    )
    try:
        with transaction.atomic():
            verdict.save(force_insert=True)
    except IntegrityError:
        return HumanVerdict.objects.get(candidate_trial=pair.candidate, rater=rater)
    return verdict


@dataclass
class Tally:
    """People's verdicts on one candidate version against the baseline."""

    version: AgentVersion
    wins: int = 0
    ties: int = 0
    losses: int = 0
    raters: int = 0
    rated_twice: int = 0  # pairs with two raters or more, on which agreement is measured
    agreement: float | None = None
    kappa: float | None = None


def tally(experiment: Experiment) -> list[Tally]:
    """Per candidate version: wins, ties and losses by people's verdicts, and how far raters
    agree on the pairs two or more of them rated."""
    candidates = experiment.versions.exclude(pk=experiment.baseline_id).select_related("agent")
    verdicts = HumanVerdict.objects.filter(candidate_trial__experiment=experiment).values_list(
        "candidate_trial__version_id", "candidate_trial_id", "rater_id", "choice"
    )
    subjects: dict[Any, dict[Any, list[str]]] = defaultdict(lambda: defaultdict(list))
    raters: dict[Any, set[Any]] = defaultdict(set)
    for version_id, trial_id, rater_id, choice in verdicts:
        subjects[version_id][trial_id].append(choice)
        raters[version_id].add(rater_id)
    tallies = []
    for version in candidates.order_by("agent__name", "number"):
        rated = list(subjects[version.pk].values())
        counts = Counter(choice for choices in rated for choice in choices)
        tallies.append(
            Tally(
                version,
                wins=counts[Choice.CANDIDATE],
                ties=counts[Choice.TIE],
                losses=counts[Choice.BASELINE],
                raters=len(raters[version.pk]),
                rated_twice=sum(len(choices) >= 2 for choices in rated),
                agreement=percent_agreement(rated),
                kappa=fleiss_kappa(rated),
            )
        )
    return tallies

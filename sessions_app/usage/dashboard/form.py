"""The dashboard's GET form: a preset or a range of days, and filters, all kept in the URL."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django import forms
from django.utils import timezone

from sessions_app.models import Agent, RunSource, User
from sessions_app.usage.dashboard import Scope
from sessions_app.usage.dashboard.tables import TABLES
from sessions_app.usage.rollups import closed_before

PRESETS = {
    "24h": ("24 h", timedelta(hours=24)),
    "7d": ("7 d", timedelta(days=7)),
    "30d": ("30 d", timedelta(days=30)),
    "90d": ("90 d", timedelta(days=90)),
}
DEFAULT_PRESET = "30d"
MAX_DAYS = 400
# Far enough from year 1 and 9999 that the previous period and the day after stay dates.
EARLIEST, LATEST = date(1970, 1, 1), date(2999, 12, 31)


class DashboardForm(forms.Form):
    range = forms.ChoiceField(
        choices=[(key, label) for key, (label, _) in PRESETS.items()], required=False
    )
    start = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    agent = forms.ModelChoiceField(
        Agent.objects.only("agent_id", "name"), required=False, empty_label="All agents"
    )
    model = forms.CharField(required=False, max_length=200)
    user = forms.CharField(required=False, max_length=150, label="User")
    source = forms.ChoiceField(
        choices=[("", "All sources"), *RunSource.choices], required=False, label="Source"
    )
    csv = forms.ChoiceField(choices=[(name, name) for name in TABLES], required=False)

    def clean_user(self) -> User | None:
        username = self.cleaned_data["user"].strip()
        if not username:
            return None
        found = User.objects.filter(username=username).only("pk", "username").first()
        if found is None:
            raise forms.ValidationError(f"No user is named “{username}”.")
        return found

    def clean(self) -> dict[str, Any]:
        """Days given: both ends known (the end defaults to today, the start to 30 days before)."""
        data = super().clean()
        start, end = data.get("start"), data.get("end")
        if "start" in self.errors or "end" in self.errors or not (start or end):
            return data
        end = data["end"] = end or timezone.now().astimezone(UTC).date()
        start = data["start"] = start or end - timedelta(days=29)
        if start < EARLIEST or end > LATEST:
            raise forms.ValidationError(f"Choose days between {EARLIEST} and {LATEST}.")
        if start > end:
            raise forms.ValidationError("The range must start before it ends.")
        if (end - start).days + 1 > MAX_DAYS:
            raise forms.ValidationError(f"Choose a range of at most {MAX_DAYS} days.")
        return data

    def scope(self, now: datetime) -> Scope:
        """A preset ends now; a range of days covers whole UTC days, both ends included."""
        data = self.cleaned_data
        start_day, end_day = data.get("start"), data.get("end")
        if start_day and end_day:
            start, end = _midnight(start_day), _midnight(end_day + timedelta(days=1))
        else:
            start, end = now - PRESETS[data.get("range") or DEFAULT_PRESET][1], now
        agent, user = data.get("agent"), data.get("user")
        return Scope(
            start=start,
            end=end,
            agent_id=agent.pk if agent else None,
            model=data.get("model", "").strip(),
            user_id=user.pk if user else None,
            source=data.get("source", ""),
            rolled_until=closed_before(now),
        )


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)

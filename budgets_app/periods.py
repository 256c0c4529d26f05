"""Budget periods: calendar days, weeks (from Monday) and months in the server's time zone
(TIME_ZONE), each starting at midnight."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import models
from django.utils import timezone


class Period(models.TextChoices):
    DAY = "day"
    WEEK = "week"
    MONTH = "month"


ADJECTIVE = {Period.DAY: "daily", Period.WEEK: "weekly", Period.MONTH: "monthly"}


def start(period: str, now: datetime) -> datetime:
    """When the period holding `now` began."""
    local = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == Period.WEEK:
        local -= timedelta(days=local.weekday())
    elif period == Period.MONTH:
        local = local.replace(day=1)
    # Midnight again in the zone's own terms: a day across a clock change keeps its midnight.
    return timezone.make_aware(local.replace(tzinfo=None))


def next_start(period: str, now: datetime) -> datetime:
    """When the period holding `now` ends and its budget is whole again."""
    begun = timezone.localtime(start(period, now)).replace(tzinfo=None)
    if period == Period.DAY:
        following = begun + timedelta(days=1)
    elif period == Period.WEEK:
        following = begun + timedelta(days=7)
    else:
        following = (begun + timedelta(days=32)).replace(day=1)
    return timezone.make_aware(following)

"""The admin's date drill-down, drawn from the first and last dates alone.

Django's own lists the distinct years (then months, days) of every row: a scan of the whole
table on each page view, seconds at a million rows. Two indexed lookups give the span; every
year, month or day inside it is offered, an empty one showing an empty list.
"""

from __future__ import annotations

import datetime
from typing import Any

from django import template
from django.contrib.admin.views.main import ChangeList
from django.utils import formats, timezone
from django.utils.text import capfirst

register = template.Library()


def _span(cl: ChangeList) -> tuple[datetime.datetime, datetime.datetime] | None:
    field = cl.date_hierarchy
    rows = cl.queryset.values_list(field, flat=True).exclude(**{f"{field}__isnull": True})
    first, last = rows.order_by(field).first(), rows.order_by(f"-{field}").first()
    if first is None or last is None:
        return None
    return timezone.localtime(first), timezone.localtime(last)


def _months(first: datetime.datetime, last: datetime.datetime) -> list[datetime.date]:
    count = (last.year - first.year) * 12 + last.month - first.month + 1
    return [
        datetime.date(first.year + (first.month - 1 + n) // 12, (first.month - 1 + n) % 12 + 1, 1)
        for n in range(count)
    ]


@register.inclusion_tag("admin/date_hierarchy.html")
def fast_date_hierarchy(cl: ChangeList) -> dict[str, Any]:
    field = cl.date_hierarchy
    names = {part: f"{field}__{part}" for part in ("year", "month", "day")}
    chosen = {part: cl.params.get(name) for part, name in names.items()}

    def link(filters: dict[str, Any]) -> str:
        return cl.get_query_string(filters, [f"{field}__"])

    if chosen["day"] and chosen["month"] and chosen["year"]:
        day = datetime.date(int(chosen["year"]), int(chosen["month"]), int(chosen["day"]))
        return {
            "show": True,
            "back": {
                "link": link({names["year"]: chosen["year"], names["month"]: chosen["month"]}),
                "title": capfirst(formats.date_format(day, "YEAR_MONTH_FORMAT")),
            },
            "choices": [{"title": capfirst(formats.date_format(day, "MONTH_DAY_FORMAT"))}],
        }
    span = _span(cl)
    if span is None:
        return {"show": False}
    first, last = span
    # As Django does: data within one year opens on its months, within one month on its days.
    year = chosen["year"] or (first.year if first.year == last.year else None)
    month = chosen["month"] or (first.month if year and first.month == last.month else None)
    if year and month:
        span_days = (last.date() - first.date()).days
        days = [first.date() + datetime.timedelta(days=n) for n in range(span_days + 1)]
        return {
            "show": True,
            "back": {"link": link({names["year"]: year}), "title": str(year)},
            "choices": [
                {
                    "link": link({names["year"]: year, names["month"]: month, names["day"]: d.day}),
                    "title": capfirst(formats.date_format(d, "MONTH_DAY_FORMAT")),
                }
                for d in days
            ],
        }
    if year:
        return {
            "show": True,
            "back": {"link": link({}), "title": "All dates"},
            "choices": [
                {
                    "link": link({names["year"]: m.year, names["month"]: m.month}),
                    "title": capfirst(formats.date_format(m, "YEAR_MONTH_FORMAT")),
                }
                for m in _months(first, last)
            ],
        }
    return {
        "show": True,
        "back": None,
        "choices": [
            {"link": link({names["year"]: str(y)}), "title": str(y)}
            for y in range(first.year, last.year + 1)
        ],
    }

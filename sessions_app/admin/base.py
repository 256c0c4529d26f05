"""What every ModelAdmin of Parley's big tables shares: cheap counts and read-only records."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.admin import helpers
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import BigIntegerField, F, Field, Func, OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

from sessions_app import signals
from sessions_app.admin import display

# Below this many rows by PostgreSQL's estimate, counting exactly is cheap enough.
ESTIMATE_ABOVE = 50_000


def total_per_row(
    rows: QuerySet,
    link: str,
    function: str,
    column: str = "",
    output_field: Field | None = None,
) -> Subquery:
    """One figure of each listed row (`COUNT` of `rows` pointing to it by `link`, or `SUM` of
    their `column`), computed for the rows on the page only. Plain aggregates, no GROUP BY
    (SQLite takes longer to plan the grouped form), and `COUNT(*)`, which PostgreSQL answers
    from the link's index alone."""
    linked = rows.filter(**{link: OuterRef("pk")}).order_by()
    if function == "COUNT":
        total = Func(template="COUNT(*)", output_field=BigIntegerField())
    else:
        total = Func(F(column), function=function, output_field=output_field or BigIntegerField())
    return Subquery(linked.annotate(total=total).values("total"))


class LargeTablePaginator(Paginator):
    """Counts an unfiltered PostgreSQL table from the planner's estimate (pg_class), as
    counting every row of a large table on every page view costs more than the page itself."""

    @cached_property
    def count(self) -> int:
        query = self.object_list.query
        connection = connections[self.object_list.db]
        if connection.vendor == "postgresql" and not query.where:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT reltuples::bigint FROM pg_class WHERE relname = %s",
                    [self.object_list.model._meta.db_table],
                )
                row = cursor.fetchone()
            if row and row[0] > ESTIMATE_ABOVE:
                return int(row[0])
        return super().count


def _action_checkbox(obj: object) -> SafeString:
    """An admin row's checkbox as HTML: Django renders the same through a widget, row by row."""
    return format_html(
        '<input type="checkbox" name="{}" value="{}" class="action-select" aria-label="{}">',
        helpers.ACTION_CHECKBOX_NAME,
        str(obj.pk),
        format_html(_("Select this object for an action - {}"), obj),
    )


class ListAdmin(admin.ModelAdmin):
    """For the large tables: estimated totals, no full count, and each row's action checkbox
    written directly (PARLEY_TUNE_ADMIN_CHECKBOX)."""

    paginator = LargeTablePaginator
    show_full_result_count = False
    list_per_page = 50

    @admin.display(description=mark_safe('<input type="checkbox" id="action-toggle">'))
    def action_checkbox(self, obj: object) -> SafeString:
        if settings.PARLEY_TUNE_ADMIN_CHECKBOX:
            return _action_checkbox(obj)
        return super().action_checkbox(obj)


class MetricColumns:
    """The figures every run and model call has, as list columns formatted for people."""

    @admin.display(description="first token", ordering="time_to_first_token")
    def first_token(self, obj: Any) -> str:
        return display.duration(obj.time_to_first_token)

    @admin.display(description="duration", ordering="duration")
    def took(self, obj: Any) -> str:
        return display.duration(obj.duration)

    @admin.display(description="cost", ordering="cost")
    def cost(self, obj: Any) -> str:
        return display.cost(obj.cost, obj.usage_estimated)

    @admin.display(description="metrics")
    def metrics(self, obj: Any) -> str:
        return " · ".join(f"{label}: {value}" for label, value in display.metrics(obj))


class RecordAdmin(ListAdmin):
    """A record of what happened (runs, messages, model calls): listed, acted on in bulk, read
    on its page, never edited or added by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The changelist's actions need "change"; an object's own page is for reading.
        return obj is None and super().has_change_permission(request)


class ReadIsTold:
    """A conversation's record whose page, opened by staff other than its owner, is told to
    whoever listens (signals.transcript_read: the audit log). `owner_key` is the attribute that
    holds the owner's key."""

    owner_key = "user_id"

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, obj: Any = None, **kw: Any
    ) -> Any:
        if obj is not None and request.method == "GET":
            owner = obj
            for part in self.owner_key.split("."):
                owner = getattr(owner, part)
            signals.send_transcript_read(request.user, obj, owner)
        return super().render_change_form(request, context, *args, obj=obj, **kw)  # type: ignore[misc]

"""Budgets in the admin: each with what is used of it now and when it renews. Changes are kept
in the audit log (audit_app, from the admin's own record of them)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.utils import timezone

from budgets_app import overview, periods, rules, spend
from budgets_app.models import Budget, amount_text


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    list_display = ["budget", "measure", "period", "limit_text", "used_now", "renews", "note"]
    list_filter = ["measure", "period", "shared"]
    list_select_related = ["user", "group", "agent"]
    autocomplete_fields = ["user"]
    fields = ["user", "group", "shared", "agent", "measure", "period", "limit", "note"]

    @admin.display(description="for")
    def budget(self, obj: Budget) -> str:
        return obj.whom()

    @admin.display(description="limit", ordering="limit")
    def limit_text(self, obj: Budget) -> str:
        return obj.amount_text()

    @admin.display(description="used now")
    def used_now(self, obj: Budget) -> str:
        """The pool's use; for a limit of each person's, how many have used theirs up."""
        now = timezone.now()
        if obj.user_id or obj.shared:
            limit = rules.budget_limit(obj)
            return amount_text(obj.measure, spend.used([limit], now)[limit])
        people = overview.people_of(obj, list(Budget.objects.all()))
        out, _ = spend.used_up(rules.budget_limit(obj), people, now)
        return f"each: {len(out)} of {people.count()} used up"

    @admin.display(description="renews")
    def renews(self, obj: Budget) -> Any:
        return periods.next_start(obj.period, timezone.now())

"""The baseline's own table: one row per message, rewritten on every token."""

from __future__ import annotations

from django.db import models


class NaiveMessage(models.Model):
    conversation = models.CharField(max_length=64, db_index=True)
    role = models.CharField(max_length=10)
    content = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"

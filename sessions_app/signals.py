"""What other apps may react to without the chat engine knowing them."""

from __future__ import annotations

from django.dispatch import Signal

# Sent after ratings are saved: sender=Run, run_ids=[...], rater="user" or "staff".
runs_rated = Signal()

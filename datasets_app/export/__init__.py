"""Exports of a dataset's accepted items for fine-tuning, with checks and a dataset card.

The formats: openai-chat, openai-preference, sharegpt, hf-messages, csv (see docs/datasets.md).
"""

from __future__ import annotations

from datasets_app.export.card import card
from datasets_app.export.checks import Finding, Tally, check, tally
from datasets_app.export.formats import FORMATS
from datasets_app.export.http import card_response, response
from datasets_app.export.stream import UnknownFormat, alines, exported_items, lines

__all__ = [
    "FORMATS",
    "Finding",
    "Tally",
    "UnknownFormat",
    "alines",
    "card",
    "card_response",
    "check",
    "exported_items",
    "lines",
    "response",
    "tally",
]

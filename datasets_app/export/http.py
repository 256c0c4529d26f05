"""Exports as HTTP responses, for the admin and the API alike."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse, StreamingHttpResponse

from audit_app.models import Action
from audit_app.record import record
from datasets_app.export.card import card
from datasets_app.export.checks import check
from datasets_app.export.stream import alines, check_split, export_format
from datasets_app.models import Dataset


def response(
    dataset: Dataset, fmt: str, split: str | None = None, *, redact: bool = False, actor: Any
) -> StreamingHttpResponse:
    """The export as an attachment, streamed a page at a time; `actor`'s download is written
    to the audit log."""
    chosen = export_format(fmt)
    split = check_split(split)
    audited(actor, dataset, fmt, split, redact)
    streamed = StreamingHttpResponse(
        alines(dataset, fmt, split, redact=redact), content_type=chosen.content_type
    )
    filename = chosen.filename(dataset.name, split)
    streamed["Content-Disposition"] = f'attachment; filename="{filename}"'
    return streamed


def card_response(
    dataset: Dataset, fmt: str, split: str | None = None, *, redact: bool = False
) -> HttpResponse:
    """The export's dataset card, with the findings of the checks, as a Markdown attachment.
    It quotes no one (counts and findings): taking it is not audited."""
    chosen = export_format(fmt)
    split = check_split(split)
    text = card(dataset, fmt, split, check(dataset, fmt, split, redact=redact), redact=redact)
    answer = HttpResponse(text, content_type="text/markdown; charset=utf-8")
    name = chosen.filename(dataset.name, split).rsplit(".", 1)[0] + ".card.md"
    answer["Content-Disposition"] = f'attachment; filename="{name}"'
    return answer


def audited(actor: Any, dataset: Dataset, fmt: str, split: str | None, redact: bool) -> None:
    """An export on the audit log: who took which dataset, in what form."""
    details = {"dataset_id": str(dataset.pk), "format": fmt, "split": split, "redact": redact}
    record(actor, Action.EXPORT, f"Exported dataset {dataset.pk} as {fmt}", obj=dataset,
           details=details)  # fmt: skip

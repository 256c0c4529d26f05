"""The datasets API (CONTRACT §5), for staff with the datasets' permissions: datasets, their
items, exports and cards.

Thin adapters, as in sessions_app.api.routes: the gate and the work are in datasets_app.services.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Query, Router, Status

from datasets_app import export
from datasets_app.schemas import (
    CardQuery,
    DatasetIn,
    DatasetList,
    DatasetListQuery,
    DatasetOut,
    ExportQuery,
    ItemIn,
    ItemList,
    ItemListQuery,
    ItemOut,
    ItemPatch,
    ItemsOut,
)
from datasets_app.services import catalog, feeds
from datasets_app.services.collect import AlreadyInDataset
from sessions_app.api.pagination import paginate
from sessions_app.api.schemas.errors import ErrorOut
from sessions_app.models import User

FORMAT_NAMES = ", ".join(export.FORMATS)
MEDIA_TYPES = ("application/jsonl", "text/csv")
# Every call here may answer 403: datasets are for staff with the permission each call names.
READ_ERRORS: dict[int, Any] = {401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 422: ErrorOut}
WRITE_ERRORS: dict[int, Any] = {**READ_ERRORS, 400: ErrorOut}
EXPORT_DOC = {
    "responses": {
        200: {
            "description": "The accepted items as a file to download, streamed: one JSON object "
            "a line (openai-chat, openai-preference, sharegpt, hf-messages) or CSV.",
            "content": {media: {"schema": {"type": "string"}} for media in MEDIA_TYPES},
        }
    }
}
CARD_DOC = {
    "responses": {
        200: {
            "description": "The dataset card, in Markdown, as a file to download.",
            "content": {"text/markdown": {"schema": {"type": "string"}}},
        }
    }
}

datasets_router = Router(tags=["datasets"])


def _user(request: HttpRequest) -> User:
    return request.auth  # type: ignore[attr-defined,no-any-return]


def install_error_handlers(api: NinjaAPI) -> None:
    def conflict(request: HttpRequest, exc: Exception) -> HttpResponse:
        return api.create_response(request, {"detail": str(exc)}, status=409)

    api.add_exception_handler(AlreadyInDataset, conflict)
    api.add_exception_handler(catalog.NameTaken, conflict)
    # An agent pointed at a dataset with a rule that accepts without review: fine as a request,
    # in conflict with what the dataset is.
    api.add_exception_handler(feeds.UnreviewedExamples, conflict)


# -- datasets --------------------------------------------------------------------------------


@datasets_router.get("", response={200: DatasetList, **READ_ERRORS})
def list_datasets(request: HttpRequest, query: Query[DatasetListQuery]) -> dict[str, Any]:
    orderings = {"name": ["name"], "created_at": ["created_at"], "updated_at": ["updated_at"]}
    datasets = catalog.datasets_for_user(_user(request))
    return paginate(datasets, query, orderings, shape=catalog.with_counts)


@datasets_router.post("", response={201: DatasetOut, 409: ErrorOut, **WRITE_ERRORS})
def create_dataset(request: HttpRequest, payload: DatasetIn) -> Status[Any]:
    """A name already taken answers 409, like any other thing that exists already."""
    return Status(201, catalog.create_dataset(_user(request), **payload.model_dump()))


@datasets_router.get("/{dataset_id}", response={200: DatasetOut, **READ_ERRORS})
def get_dataset(request: HttpRequest, dataset_id: uuid.UUID) -> Any:
    dataset = catalog.get_dataset_for_user(_user(request), dataset_id)
    catalog.with_counts([dataset])
    return dataset


# -- items -----------------------------------------------------------------------------------


@datasets_router.get("/{dataset_id}/items", response={200: ItemList, **READ_ERRORS})
def list_items(
    request: HttpRequest, dataset_id: uuid.UUID, query: Query[ItemListQuery]
) -> dict[str, Any]:
    """Its items, oldest first by default; filter by `status`, `split` or `source`."""
    items = catalog.items_for_user(
        _user(request), dataset_id, status=query.status, split=query.split, source=query.source
    )
    return paginate(items, query, {"created_at": ["created_at"]})


@datasets_router.post(
    "/{dataset_id}/items", response={201: ItemsOut, 409: ErrorOut, **WRITE_ERRORS}
)
def add_items(request: HttpRequest, dataset_id: uuid.UUID, payload: ItemIn) -> Status[Any]:
    """Add a completed run (`run_id`) or a whole session (`session_id`), exactly one, as it is
    now: later edits of the session do not change the item.

    Answers `{"data": [item, ...]}`: the new item first, then, for a run regenerated with the
    opposite rating, its preference pair (source "pair", always pending). A run in the dataset
    already still brings its pair when that is missing (its sibling rated since): then only the
    pair is listed. 409 when the run (and its pair) or the session is in the dataset already;
    422 when it has nothing to learn from (not completed, no answer); 404 for an unknown run or
    session.
    """
    items = catalog.add_items(
        _user(request),
        dataset_id,
        run_id=payload.run_id,
        session_id=payload.session_id,
        status=payload.status,
        split=payload.split,
        use_weights=payload.use_weights,
    )
    return Status(201, {"data": items})


@datasets_router.patch("/{dataset_id}/items/{item_id}", response={200: ItemOut, **WRITE_ERRORS})
def update_item(
    request: HttpRequest, dataset_id: uuid.UUID, item_id: uuid.UUID, payload: ItemPatch
) -> Any:
    """Review an item: `status`, `split`, `corrected_answer`, `use_weights`; only the fields
    sent change. Back to `pending` clears when it was reviewed."""
    changes = payload.model_dump(exclude_unset=True)
    return catalog.update_item(_user(request), dataset_id, item_id, **changes)


# -- files -----------------------------------------------------------------------------------


@datasets_router.get(
    "/{dataset_id}/export",
    response=READ_ERRORS,
    openapi_extra=EXPORT_DOC,
    description=f"The accepted items of the dataset (of one `split` if given) as a file, "
    f"streamed. `format`: {FORMAT_NAMES}. Items of users who opted out of training are left "
    "out; `redact` masks personal data.",
)
def export_dataset(
    request: HttpRequest, dataset_id: uuid.UUID, query: Query[ExportQuery]
) -> HttpResponse:
    dataset = catalog.get_dataset_for_user(_user(request), dataset_id, catalog.EXPORT)
    # An unknown format raises export.UnknownFormat (a ValueError: 422) before anything is sent.
    return export.response(
        dataset, query.format, query.split, redact=query.redact, actor=_user(request)
    )


@datasets_router.get(
    "/{dataset_id}/card",
    response=READ_ERRORS,
    openapi_extra=CARD_DOC,
    description=f"The dataset card (Markdown) of an export: what is in it, how it was made, and "
    f"what the checks found. `format`: {FORMAT_NAMES}.",
)
def dataset_card(
    request: HttpRequest, dataset_id: uuid.UUID, query: Query[CardQuery]
) -> HttpResponse:
    dataset = catalog.get_dataset_for_user(_user(request), dataset_id, catalog.EXPORT)
    return export.card_response(dataset, query.format, query.split, redact=query.redact)

"""The one NinjaAPI; each area of the product adds its router here."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.datastructures import MultiValueDict
from ninja import NinjaAPI
from ninja.openapi.schema import OpenAPISchema
from ninja.parser import Parser

from datasets_app.api import datasets_router
from datasets_app.api import install_error_handlers as install_dataset_errors
from evals_app.api import experiments_router
from evals_app.api import install_error_handlers as install_experiment_errors
from sessions_app.api import sse
from sessions_app.api.auth import AUTH
from sessions_app.api.errors import install_error_handlers
from sessions_app.api.routes import agents_router, metrics_router, runs_router, sessions_router


def _keys_as_property_names(node: Any) -> None:
    """pydantic writes dict[constrained str, V] as `patternProperties`, which leaves keys that do
    not match unconstrained, although pydantic refuses them: say `propertyNames` instead."""
    if isinstance(node, dict):
        patterns = node.get("patternProperties")
        if isinstance(patterns, dict) and len(patterns) == 1 and "additionalProperties" not in node:
            ((pattern, value),) = patterns.items()
            del node["patternProperties"]
            node["propertyNames"] = {"pattern": pattern}
            node["additionalProperties"] = value
        for child in node.values():
            _keys_as_property_names(child)
    elif isinstance(node, list):
        for child in node:
            _keys_as_property_names(child)


class OneValueParser(Parser):
    """A parameter that takes one value and is given several (`?sort_order=asc&sort_order=desc`)
    is refused with 422, as any other value of the wrong type: ninja's own parser kept the last
    and dropped the others unsaid."""

    def parse_querydict(
        self, data: MultiValueDict, list_fields: list[str], request: HttpRequest
    ) -> dict[str, Any]:
        parsed = super().parse_querydict(data, list_fields, request)
        for key in parsed.keys() - set(list_fields):
            values = data.getlist(key)
            if len(values) > 1:
                parsed[key] = values  # the schema's scalar type refuses a list
        return parsed


class ParleyAPI(NinjaAPI):
    def get_openapi_operation_id(self, operation: Any) -> str:
        # "list_sessions" rather than "sessions_app_api_list_sessions" in generated clients.
        return str(operation.view_func.__name__)

    def get_openapi_schema(self, **kwargs: Any) -> OpenAPISchema:
        schema = super().get_openapi_schema(**kwargs)
        schema["components"]["schemas"].update(sse.openapi_components())
        _keys_as_property_names(schema)
        return schema


api = ParleyAPI(
    title="Parley API",
    version="1.0",
    urls_namespace="api",
    auth=AUTH,
    parser=OneValueParser(),
    description="Sessions, runs (with SSE streaming), agents, metrics and (staff) datasets. "
    "Authenticate with `Authorization: Bearer <token>` (create one on the API tokens page or with "
    "`manage.py create_api_token`) or the browser session plus its CSRF token.",
)
install_error_handlers(api)
install_dataset_errors(api)
install_experiment_errors(api)
api.add_router("/agents", agents_router)
api.add_router("/sessions", sessions_router)
api.add_router("/runs", runs_router)
api.add_router("/metrics", metrics_router)
api.add_router("/datasets", datasets_router)
api.add_router("/experiments", experiments_router)

"""Value types of the REST API's requests: they validate exactly what the published schema says.

Request bodies are plain pydantic models, strict where JSON has a type: ninja's Schema reads any
object by attribute (so `[1, 2]` would pass as an empty body), and lax pydantic would take "yes"
for true or "2.0" for 2 where the schema promises a boolean or an integer.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, date, datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    StrictBool,
    StrictFloat,
    StrictInt,
    StringConstraints,
)
from typing_extensions import TypeAliasType

from sessions_app.ids import SESSION_ID_MAX_LENGTH, SESSION_ID_PATTERN

# PostgreSQL refuses NUL in text and jsonb: refused up front, and said so in the schema.
NO_NUL = r"^[^\x00]*$"
# ...and at least one character that str.strip() keeps. The spaces are spelled out: `\s` means
# different things to Python, to pydantic's Rust regex and to the ECMA regex of JSON Schema.
_SPACES = r"\t\n\x0b\x0c\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
VISIBLE = rf"^[^\x00]*[^\x00{_SPACES}][^\x00]*$"
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _canonical_uuid(value: Any) -> Any:
    # pydantic would also take "0123…" without dashes or "urn:uuid:…"; the schema says uuid.
    if isinstance(value, str) and not _UUID.fullmatch(value):
        raise ValueError("must be a UUID like 123e4567-e89b-12d3-a456-426614174000")
    return value


def integer_text(value: Any) -> Any:
    # Query values are text; pydantic would read "2.0", " 2" or "1_0" as integers too.
    if isinstance(value, str) and not re.fullmatch(r"-?[0-9]+", value):
        raise ValueError("must be an integer")
    return value


def json_integer(value: Any) -> Any:
    # JSON Schema counts 3.0 as an integer, but not "3" or true (which lax pydantic would take).
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int | None):
        raise ValueError("must be an integer")
    return value


def json_number(value: Any) -> Any:
    # A JSON number; lax pydantic would take "0.5" or true as well.
    if isinstance(value, bool) or not isinstance(value, int | float | None):
        raise ValueError("must be a number")
    return value


def _date_or_datetime(value: Any) -> Any:
    if isinstance(value, str):
        if not re.match(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
            # pydantic would read "0.5" as a Unix timestamp.
            raise ValueError("must be an ISO 8601 date or datetime")
        if len(value) == 10:
            # pydantic reads "2025-01-31" as its midnight; a bare date means the whole day here.
            return date.fromisoformat(value)
    return value


def _utc(value: date | datetime) -> date | datetime:
    # Without an offset a datetime is UTC; converting here keeps far-off offsets from
    # overflowing in the database.
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        try:
            value = value.astimezone(UTC)
        except OverflowError as exc:
            raise ValueError("is out of range") from exc
    return value


Text = Annotated[str, StringConstraints(strict=True, pattern=NO_NUL)]
Id = Annotated[uuid.UUID, BeforeValidator(_canonical_uuid)]
SessionId = Annotated[
    str,
    StringConstraints(strict=True, max_length=SESSION_ID_MAX_LENGTH, pattern=SESSION_ID_PATTERN),
]
When = Annotated[datetime | date, BeforeValidator(_date_or_datetime), AfterValidator(_utc)]
_JSONScalar = StrictBool | StrictInt | StrictFloat | Text
JSONValue = TypeAliasType(  # type: ignore[misc]
    "JSONValue", _JSONScalar | list["JSONValue"] | dict[Text, "JSONValue"] | None
)
JSONObject = dict[Text, JSONValue]


class Body(BaseModel):
    """A JSON object request body; unknown fields are refused, so a typo does not pass silently."""

    model_config = ConfigDict(extra="forbid")

"""The one NinjaAPI; each area of the product adds its router here."""

from __future__ import annotations

from ninja import NinjaAPI

api = NinjaAPI(title="Parley API", version="1.0", urls_namespace="api")

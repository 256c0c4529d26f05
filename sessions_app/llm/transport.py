"""The HTTP library `openai` sends with, and the failures it raises."""

from __future__ import annotations

from typing import Any

import httpx

try:  # httpx2 in recent releases of `openai`, httpx before
    import httpx2

    _MODULES: tuple[Any, ...] = (httpx, httpx2)
except ImportError:  # pragma: no cover - depends on the installed openai
    _MODULES = (httpx,)

HTTP = _MODULES[-1]  # the one `openai` sends with
TIMEOUT_ERRORS = tuple(m.TimeoutException for m in _MODULES)
# The server took the request but has not answered yet, as opposed to not taking it at all.
READ_TIMEOUT_ERRORS = tuple(m.ReadTimeout for m in _MODULES)
TRANSPORT_ERRORS = tuple(m.TransportError for m in _MODULES)

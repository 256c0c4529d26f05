"""WhiteNoise on Django's async request path.

WhiteNoise's middleware is sync-only, and one sync-only middleware makes Django run every request
through the single thread that also does all the ORM work: under load, an API request waited for
other runs' database work before any code of its own ran. This one serves static files the same
way and hands everything else on without leaving the event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import HttpRequest, HttpResponse
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[..., Any]) -> None:
        super().__init__(get_response)
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        return super().__call__(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        if self.autorefresh:  # development: look on disk, off the event loop
            static_file = await sync_to_async(self.find_file, thread_sensitive=False)(
                request.path_info
            )
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return self.serve(static_file, request)
        get_response: Callable[[HttpRequest], Awaitable[HttpResponse]] = self.get_response
        return await get_response(request)

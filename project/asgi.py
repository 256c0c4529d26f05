"""ASGI entry point: HTTP through Django behind a body size limit, WebSockets through Channels
behind origin and auth; the lifespan starts and stops the run engine."""

from __future__ import annotations

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from safety.bodylimit import BodyLimit  # noqa: E402
from serving import tuning  # noqa: E402
from sessions_app.engine import lifespan  # noqa: E402
from sessions_app.web.routing import websocket_urlpatterns  # noqa: E402


class EngineLifespan:
    """The run engine's life as an ASGI server's (uvicorn's, a test tool's) lifespan events
    give it. daphne sends none: `serve` starts and stops the engine around it, and daphne run
    directly has it started by the first connection, on its loop, for the process's life."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await self.lifespan(receive, send)
        if lifespan.never_started():
            lifespan.start()
        return await self.app(scope, receive, send)

    async def lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                lifespan.start(reap_now=True)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await lifespan.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return


application = EngineLifespan(
    ProtocolTypeRouter(
        {
            "http": BodyLimit(tuning.apply(django_asgi_app)),
            "websocket": AllowedHostsOriginValidator(
                AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
            ),
        }
    )
)

from __future__ import annotations

from django.urls import path

from sessions_app.web.consumer import ChatConsumer

websocket_urlpatterns = [path("ws/chat/", ChatConsumer.as_asgi())]

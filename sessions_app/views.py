from __future__ import annotations

import asyncio
import uuid

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from sessions_app.llm import client as llm


def _db_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:
        return False


async def _layer_ok() -> bool:
    layer = get_channel_layer()
    if layer is None:
        return False
    try:
        channel = await layer.new_channel()
        probe = {"type": "healthz.probe", "nonce": uuid.uuid4().hex}
        await layer.send(channel, probe)
        return await asyncio.wait_for(layer.receive(channel), 2.0) == probe
    except Exception:
        return False


@require_GET
async def healthz(request: HttpRequest) -> JsonResponse:
    db_ok, layer_ok, llm_ok = await asyncio.gather(sync_to_async(_db_ok)(), _layer_ok(), llm.ping())
    body = {
        "db": "ok" if db_ok else "error",
        "channel_layer": "ok" if layer_ok else "error",
        "llm": "ok" if llm_ok else "unreachable",
    }
    return JsonResponse(body, status=200 if db_ok and layer_ok else 503)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "sessions_app/home.html")

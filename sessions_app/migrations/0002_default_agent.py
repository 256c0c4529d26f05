"""A default agent named Assistant, using LLM_MODEL, so a fresh install can chat at once."""

from __future__ import annotations

from django.conf import settings
from django.db import migrations


def create_default_agent(apps, schema_editor):
    Agent = apps.get_model("sessions_app", "Agent")
    if not Agent.objects.exists():
        Agent.objects.create(
            name="Assistant",
            model=settings.LLM_MODEL,
            instructions="You are a helpful assistant.",
            is_default=True,
        )


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0001_initial")]
    operations = [migrations.RunPython(create_default_agent, migrations.RunPython.noop)]

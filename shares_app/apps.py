from __future__ import annotations

from django.apps import AppConfig


class SharesConfig(AppConfig):
    name = "shares_app"
    verbose_name = "Share links"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.urls import reverse

        from sessions_app.accounts import SettingsSection, add_settings_section
        from sessions_app.web.links import ConversationLink, add_conversation_link
        from shares_app import views

        add_conversation_link(
            ConversationLink(
                "Share", "session-share", lambda s: reverse("share_session", args=[s.pk])
            )
        )
        template = "shares_app/_settings_section.html"
        add_settings_section(SettingsSection("share-links", template, views.settings_section))

"""Error reports without the installation's secrets: Django's debug pages (a developer's DEBUG),
its error e-mails, and the log of errors.

Django hides settings whose names look secret (SECRET_KEY, DATABASES' PASSWORD), but not a
password inside a URL (DATABASE_URL, REDIS_URL, the channel layer's hosts), nor anything in a
traceback's local variables or an exception's message. Here two nets catch those: every value
shown is masked as safety.redact masks text, and the finished report has each secret this
installation is configured with replaced wherever it still appears.
"""

from __future__ import annotations

import html
import logging
import os
import re
from typing import Any
from urllib.parse import unquote, urlsplit

from django.conf import settings
from django.views.debug import ExceptionReporter, SafeExceptionReporterFilter

from safety.redact import mask_secrets

# Secrets shorter than this are not swept from reports: they would mask common fragments.
SHORTEST_SWEPT = 4
URL_SETTINGS = ("DATABASE_URL", "REDIS_URL", "LLM_BASE_URL")
# Values of variables such as PARLEY_EMBEDDED_MAX_TOKENS, which only their names make look secret.
NOT_A_SECRET = re.compile(r"[\d.]*|true|false|yes|no|on|off", re.I)


class SecretsFilter(SafeExceptionReporterFilter):
    """Django's, also hiding credentials by name and URLs' passwords, in settings, the request's
    META and the traceback's variables, which Django leaves as they are."""

    hidden_settings = re.compile(
        "API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|CREDENTIAL|PRIVATE|DSN", flags=re.I
    )

    def cleanse_setting(self, key: Any, value: Any) -> Any:
        cleansed = super().cleanse_setting(key, value)
        return mask_secrets(cleansed) if isinstance(cleansed, str) else cleansed

    def get_traceback_frame_variables(self, request: Any, tb_frame: Any) -> Any:
        # Not by the variable's own name (`key` is every loop's), but inside dicts and strings.
        variables = super().get_traceback_frame_variables(request, tb_frame)
        return [(name, self.cleanse_setting("", value)) for name, value in variables]


class SecretsReporter(ExceptionReporter):
    """Django's report, with each configured secret swept from the finished page or text."""

    def get_traceback_html(self) -> str:
        return sweep(super().get_traceback_html())

    def get_traceback_text(self) -> str:
        return sweep(super().get_traceback_text())


class SecretsFormatter(logging.Formatter):
    """A log line, its traceback included, with secrets masked and swept."""

    def format(self, record: logging.LogRecord) -> str:
        return sweep(mask_secrets(super().format(record)))


def sweep(text: str) -> str:
    for secret in configured_secrets():
        for form in {secret, html.escape(secret), repr(secret)[1:-1]}:
            text = text.replace(form, SafeExceptionReporterFilter.cleansed_substitute)
    return text


def configured_secrets() -> list[str]:
    """The secrets of this installation: its keys, its database's and Redis' passwords, and
    the value of each of Parley's environment variables whose name says it is secret. Longest
    first, so that a secret containing another is replaced whole."""
    found = {settings.SECRET_KEY, getattr(settings, "LLM_API_KEY", "")}
    found.update(getattr(settings, "SECRET_KEY_FALLBACKS", []))
    found.update(str(db.get("PASSWORD") or "") for db in settings.DATABASES.values())
    urls = [str(getattr(settings, name, "") or "") for name in URL_SETTINGS]
    for name in getattr(settings, "ENVIRONMENT_NAMES", ()):
        value = os.environ.get(name, "")
        if SecretsFilter.hidden_settings.search(name) and not NOT_A_SECRET.fullmatch(value):
            found.add(value)
        urls.append(value)
    for url in urls:
        password = _url_password(url)
        found.update({password, unquote(password)})
    return sorted((s for s in found if len(s) >= SHORTEST_SWEPT), key=len, reverse=True)


def _url_password(url: str) -> str:
    if "://" not in url:
        return ""
    try:
        return urlsplit(url.strip()).password or ""
    except ValueError:
        return ""

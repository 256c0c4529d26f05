"""Redaction: personal data and secrets in exported text replaced by a placeholder naming
what was there.

Patterns lean towards catching too much: a dataset leaves the server for good once exported.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

# (kind, pattern, placeholder); earlier kinds win where matches overlap.
_PATTERNS: list[tuple[str, re.Pattern[str], str]] = [
    (
        "bearer token",
        re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{12,}"),
        "Bearer [token]",
    ),
    (
        "API key",
        re.compile(
            r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}"  # OpenAI, Anthropic, Stripe
            r"|\b(?:ghp|gho|ghs|ghu|github_pat)_[A-Za-z0-9_]{20,}"  # GitHub
            r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
            r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key id
            r"|\bAIza[0-9A-Za-z_-]{35}"  # Google
        ),
        "[api-key]",
    ),
    (
        "e-mail address",
        re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
        "[email]",
    ),
    (
        "secret",
        # Long hex (keys, digests of secrets) or base64 runs mixing letters and digits.
        re.compile(r"\b[0-9a-fA-F]{32,}\b|(?<![A-Za-z0-9+/])[A-Za-z0-9+/_-]{40,}={0,2}"),
        "[secret]",
    ),
    (
        "phone number",
        # Not next to a letter, digit, "+" or "-": the digits inside a UUID or a hex id joined by
        # dashes are not a phone number.
        re.compile(r"(?<![\w+-])\+?(?:\(\d{1,4}\)[ -]?)?\d[\d -]{6,}\d(?![\w-])"),
        "[phone]",
    ),
]
_PHONE_DIGITS = range(9, 16)  # E.164 numbers have at most 15 digits; fewer than 9 are rarely phones


def _is_secret(text: str) -> bool:
    if re.fullmatch(r"[0-9a-fA-F]+", text):
        return True
    # A long word of letters only is prose (or a URL slug); a secret mixes in digits.
    return any(c.isdigit() for c in text) and any(c.isalpha() for c in text)


def _is_phone(text: str) -> bool:
    if sum(c.isdigit() for c in text) not in _PHONE_DIGITS:
        return False
    # Bare digits are an order number, an id or a timestamp; a phone number is written with a
    # leading + or grouped by spaces, dashes or brackets.
    return text.startswith("+") or not text.isdigit()


def _accepts(kind: str, text: str) -> bool:
    if kind == "phone number":
        return _is_phone(text)
    if kind == "secret":
        return _is_secret(text)
    return True


class Redactor:
    """Replaces what it finds and counts it by kind, for the findings of one item."""

    def __init__(self) -> None:
        self.found: Counter[str] = Counter()

    def __call__(self, text: str) -> str:
        for kind, pattern, placeholder in _PATTERNS:
            text = pattern.sub(self._replace(kind, placeholder), text)
        return text

    def _replace(self, kind: str, placeholder: str) -> Callable[[re.Match[str]], str]:
        def replace(match: re.Match[str]) -> str:
            if not _accepts(kind, match.group(0)):
                return match.group(0)
            self.found[kind] += 1
            return placeholder

        return replace

    def summary(self) -> str:
        """What was replaced, by kind, as a finding says it."""
        return ", ".join(f"{count} × {kind}" for kind, count in sorted(self.found.items()))


def keep(text: str) -> str:
    return text

"""Redaction: personal data and secrets in exported text replaced by a placeholder naming
what was there.

Patterns lean towards catching too much: a dataset leaves the server for good once exported.
Every pattern runs in time linear in the text: a message is user input, and a regular expression
that retries a long run from each of its positions would let one planted message stall an export.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator

Spans = Callable[[str], Iterator[tuple[int, int]]]

_LOCAL_PART = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-")
_DOMAIN = re.compile(r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_PHONE = re.compile(r"(?<![\w+-])\+?(?:\(\d{1,4}\)[ -]?)?\d[\d -]{6,}\d(?![\w-])")
_PHONE_START = re.compile(r"(?<![\w+-])[+(\d]")
_PHONE_RUN = re.compile(r"[\d -]*")


def _matches(pattern: re.Pattern[str]) -> Spans:
    # Linear as they stand: each starts at a literal prefix or the edge of a run, and a failed
    # attempt gives up within a bounded number of characters.
    return lambda text: (m.span() for m in pattern.finditer(text))


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _boundary(text: str, pos: int) -> bool:
    """What `\\b` means in a str pattern."""
    before = pos > 0 and _is_word(text[pos - 1])
    return before != (pos < len(text) and _is_word(text[pos]))


def _emails(text: str) -> Iterator[tuple[int, int]]:
    """What `\\b[A-Za-z0-9._%+-]+@<domain>` finds, found from each "@" outwards.

    Searched left to right, that pattern would rescan the run before an "@" from each of its
    positions (quadratic on `a.a.a…`); each address holds exactly one "@", so each run is read once.
    """
    resume = 0
    at = text.find("@")
    while at != -1:
        start = at
        while start > resume and text[start - 1] in _LOCAL_PART:
            start -= 1
        # The pattern's first start inside the run is its first word boundary.
        while start < at and not _boundary(text, start):
            start += 1
        domain = _DOMAIN.match(text, at + 1)
        if start < at and domain:
            yield start, domain.end()
            resume = domain.end()
        at = text.find("@", at + 1)


def _phones(text: str) -> Iterator[tuple[int, int]]:
    """What `_PHONE` finds, trying each run of digits, spaces and dashes once.

    The end of a number is the run's last digit not followed by a letter or dash: when the
    run's first start finds none, no later start in the run can, and after a number none is left.
    """
    pos = 0
    while start := _PHONE_START.search(text, pos):
        found = _PHONE.match(text, start.start())
        if found:
            yield found.span()
            pos = _PHONE_RUN.match(text, found.end()).end()
        elif text[start.start()] in "+(":
            pos = start.end()
        else:
            pos = _PHONE_RUN.match(text, start.start()).end()


# (kind, finder, placeholder); earlier kinds win where matches overlap.
_PATTERNS: list[tuple[str, Spans, str]] = [
    (
        "bearer token",
        _matches(re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{12,}")),
        "Bearer [token]",
    ),
    (
        "API key",
        _matches(
            re.compile(
                r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}"  # OpenAI, Anthropic, Stripe
                r"|\b(?:ghp|gho|ghs|ghu|github_pat)_[A-Za-z0-9_]{20,}"  # GitHub
                r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
                r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key id
                r"|\bAIza[0-9A-Za-z_-]{35}"  # Google
            )
        ),
        "[api-key]",
    ),
    ("e-mail address", _emails, "[email]"),
    (
        "secret",
        # Long hex (keys, digests of secrets) or base64 runs mixing letters and digits.
        _matches(re.compile(r"\b[0-9a-fA-F]{32,}\b|(?<![A-Za-z0-9+/])[A-Za-z0-9+/_-]{40,}={0,2}")),
        "[secret]",
    ),
    # Not next to a letter, digit, "+" or "-": the digits inside a UUID or a hex id joined by
    # dashes are not a phone number.
    ("phone number", _phones, "[phone]"),
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
        for kind, spans, placeholder in _PATTERNS:
            text = self._replace(kind, spans, placeholder, text)
        return text

    def _replace(self, kind: str, spans: Spans, placeholder: str, text: str) -> str:
        pieces, done = [], 0
        for start, end in spans(text):
            if _accepts(kind, text[start:end]):
                pieces += [text[done:start], placeholder]
                done = end
                self.found[kind] += 1
        pieces.append(text[done:])
        return "".join(pieces)

    def summary(self) -> str:
        """What was replaced, by kind, as a finding says it."""
        return ", ".join(f"{count} × {kind}" for kind, count in sorted(self.found.items()))


def keep(text: str) -> str:
    return text

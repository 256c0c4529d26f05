"""Redaction's patterns on hostile input: each finishes in time linear in the text, and finds
what the straightforward regular expressions find on everything else.

Timed (with tests/security/test_mask_secrets.py, the suite's only timed tests): a message is
user input, and a pattern that retries a long run from each of its positions let a
32,000-character message take seconds (from half a minute to minutes at 200,000). Measured in
CPU time of this process, so other load on the machine does not count, with a wide margin:
linear patterns take about a tenth of a second here.
"""

from __future__ import annotations

import random
import re
import time

import pytest

from datasets_app.export.redact import Redactor, _accepts

N = 200_000
# CPU time of this process, not the wall clock: other load on the machine does not count.
LIMIT_SECONDS = 2.0


def repeated(unit: str, tail: str = "") -> str:
    return (unit * (N // len(unit) + 1))[:N] + tail


HOSTILE = {
    "e-mail without an @": repeated("a."),
    "e-mail with an @ and no domain": repeated("a.", "@"),
    "e-mail with a dotted domain without a top level": "a." * (N // 4) + "@" + "x." * (N // 4),
    "e-mails sharing their parts": repeated("a@"),
    "phone digits each followed by a dash": repeated("1- ", "-"),
    "phone after a bracketed prefix": "(12) " + repeated("1- ", "-"),
    "phone after a plus": "+" + repeated("1- ", "-"),
    "secret runs one short": repeated("_-" * 19 + "_ "),
    "hex runs one short": repeated("a" * 31 + " "),
    "API key prefixes": repeated("sk-"),
    "GitHub token prefixes": repeated("ghp_ab "),
    "bearer words": repeated("bearer "),
    "bearer before a sea of spaces": "bearer" + " " * N + "x",
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_text_is_redacted_in_linear_time(text):
    began = time.process_time()
    Redactor()(text)
    assert time.process_time() - began < LIMIT_SECONDS


# The patterns as first written, quadratic on the texts above; on any other text the linear ones
# must find the same.
_STRAIGHTFORWARD = [
    ("bearer token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{12,}", "Bearer [token]"),
    (
        "API key",
        r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}|\b(?:ghp|gho|ghs|ghu|github_pat)_[A-Za-z0-9_]{20,}"
        r"|\bxox[abprs]-[A-Za-z0-9-]{10,}|\bAKIA[0-9A-Z]{16}\b|\bAIza[0-9A-Za-z_-]{35}",
        "[api-key]",
    ),
    (
        "e-mail address",
        r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b",
        "[email]",
    ),
    ("secret", r"\b[0-9a-fA-F]{32,}\b|(?<![A-Za-z0-9+/])[A-Za-z0-9+/_-]{40,}={0,2}", "[secret]"),
    (
        "phone number",
        r"(?<![\w+-])\+?(?:\(\d{1,4}\)[ -]?)?\d[\d -]{6,}\d(?![\w-])",
        "[phone]",
    ),
]


def straightforward(text: str) -> str:
    for kind, pattern, placeholder in _STRAIGHTFORWARD:
        text = re.sub(
            pattern,
            lambda m, k=kind, p=placeholder: p if _accepts(k, m.group(0)) else m.group(0),
            text,
        )
    return text


ORDINARY = [
    "Write to bob.smith+x@mail.example.org or to -carol@example.co.uk, not to x@y.",
    "a@b.com.x@y.com and a@b.com+c@d.com; support@example.com, sales@example.com.",
    "Call +1 (555) 123-4567, +44 20 7946 0958, (555) 123-4567 or 555 123 4567 ext. 12.",
    "Order 1234567890 shipped on 2026-03-01 at 12:30; ids 550e8400-e29b-41d4-a716-446655440000.",
    "Authorization: Bearer abc.def-ghi_jkl012345 and key sk-live1234567890abcdefghij",
    "AKIAIOSFODNN7EXAMPLE, ghp_abcdefghijklmnopqrstuvwxyz0123, xoxb-1234567890-abc",
    "digest 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08==x",
    "dGhpcyBpcyBhIGxvbmcgYmFzZTY0IHN0cmluZyB3aXRoIDEyMyBkaWdpdHM= and é1@x.io",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_redacted_as_the_straightforward_patterns_redact_it(text):
    assert Redactor()(text) == straightforward(text)


def test_random_text_is_redacted_as_the_straightforward_patterns_redact_it():
    rng = random.Random(30)
    alphabets = ["a.@b-é_+%c 1m", "1 -2+()a_é9٣.", "sk-ghp_AKIA0123456789abcdef=/+ "]
    for _ in range(20_000):
        alphabet = rng.choice(alphabets)
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        assert Redactor()(text) == straightforward(text), text

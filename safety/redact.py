"""Secrets masked in text that others will read: what a model endpoint said went wrong, an
error report, a log line.

What looks like a credential is masked, and nothing else: a provider's key (`sk-…`), a bearer
token, the value of `api_key=` or `password:`, the password of a URL, a JSON web token, and a
long run of hex or mixed letters and digits such as a generated key. Ordinary words, numbers,
UUIDs and request ids stay as they are, so the message still says what went wrong.
"""

from __future__ import annotations

import re

MASK = "********"

# A run of token characters holding a digit: what a credential is and a word is not.
_WITH_DIGIT = r"(?=[\w.~+/=-]*\d)"
_SECRET_NAMES = (
    r"api[_-]?key|secret(?:[_-]?key)?|private[_-]?key|password|passwd|access[_-]?token"
    r"|auth[_-]?token|refresh[_-]?token"
)
# Linear time on any text (it holds user input and whatever an endpoint sent back): a pattern
# that may begin anywhere in a long run of its characters starts only where the run starts,
# `(?<!…)`, and finds its anchor in the run once, atomically `(?>…)`, never from each position.
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # user:password@ in a URL (postgres://, redis://, https://…): the user stays.
    (
        re.compile(
            r"(?<![a-z0-9+.-])((?>[a-z0-9+.-]*?(?<!\w)[a-z])[a-z0-9+.-]*+://[^\s:/@]*+:)"
            r"[^\s@/]+@",
            re.I,
        ),
        rf"\1{MASK}@",
    ),
    # A name that says "secret" and the value given to it: api_key=…, "password": "…".
    (
        re.compile(
            rf"""((?<![\w-])(?>[\w-]*?(?:{_SECRET_NAMES})(?![\w-]))["']?\s*[:=]\s*["']?)"""
            r"""[^\s"',;&]+""",
            re.I,
        ),
        rf"\1{MASK}",
    ),
    (re.compile(rf"\b(Bearer|Basic)\s+{_WITH_DIGIT}[\w.~+/=-]{{8,}}", re.I), rf"\1 {MASK}"),
    # Providers' key formats: OpenAI's sk-/sk-proj-, Anthropic's sk-ant-, Groq's gsk_, xAI's
    # xai-, Hugging Face's hf_, GitHub's ghp_ and github_pat_, GitLab's glpat-, Google's AIza.
    (
        re.compile(
            r"(?<![\w-])((?>[\w-]*?\b(?:sk|rk|pk|gsk|xai|hf|gh[pousr]|github_pat|glpat)[-_]))"
            r"(?=[\w-]*\d)[\w-]{12,}"
        ),
        rf"\1{MASK}",
    ),
    (re.compile(r"\bAIza[\w-]{30,}"), MASK),
    # A JSON web token.
    (
        re.compile(r"(?<![\w-])(?>([\w-]*?)\beyJ)[\w-]{8,}\.[\w-]{8,}\.[\w-]+"),
        rf"\1{MASK}",
    ),
    (re.compile(r"\b[0-9a-f]{32,}\b", re.I), MASK),  # hex: 128 bits or more
    # base64 and the like: 32 characters or more mixing upper case, lower case and digits.
    (
        re.compile(r"(?<![\w+/=-])(?=[\w+/-]*\d)(?=[\w+/-]*[a-z])(?=[\w+/-]*[A-Z])[\w+/-]{32,}=*"),
        MASK,
    ),
]


def mask_secrets(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text

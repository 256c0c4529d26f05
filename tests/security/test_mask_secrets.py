"""mask_secrets on hostile input: it runs on every upstream error text (on the event loop), every
log line and every variable of an error report, user input among them, so each pattern finishes
in time linear in the text; and it masks what the straightforward patterns mask on everything
else.

Timed like tests/datasets/test_redaction.py: in CPU time of this process, with a wide margin. Linear
patterns take about a tenth of a second on the longest of these; the straightforward ones, which
retry a long run from each of its positions, took 13 s on 16,000 characters and would take hours
on 200,000.
"""

from __future__ import annotations

import random
import re
import time

import pytest

from safety.redact import MASK, mask_secrets

N = 200_000
LIMIT_SECONDS = 2.0


def repeated(unit: str, tail: str = "") -> str:
    return (unit * (N // len(unit) + 1))[:N] + tail


HOSTILE = {
    "URL scheme characters": repeated("a-"),
    "URL scheme characters, then a colon": repeated("a.", ":"),
    "URL schemes without a password": repeated("a://"),
    "URL password without an @": "a://x:" + repeated("y:"),
    "names of secrets in a word": repeated("password-"),
    "names of secrets without a value": repeated("api_key "),
    "bearer words": repeated("bearer "),
    "bearer before a sea of spaces": "bearer" + " " * N + "x",
    "API key prefixes": repeated("sk-"),
    "GitHub token prefixes": repeated("ghp-"),
    "Google key prefixes": repeated("AIza-"),
    "JSON web token beginnings": repeated("eyJ-"),
    "JSON web token without its third part": repeated("eyJabcdefgh."),
    "hex runs one short": repeated("a" * 31 + " "),
    "base64 without a digit": repeated("aA+"),
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_text_is_masked_in_linear_time(text):
    began = time.process_time()
    mask_secrets(text)
    assert time.process_time() - began < LIMIT_SECONDS


# The patterns as first written, quadratic on the texts above; on any other text the linear ones
# must mask the same.
_NAMES = (
    r"api[_-]?key|secret(?:[_-]?key)?|private[_-]?key|password|passwd|access[_-]?token"
    r"|auth[_-]?token|refresh[_-]?token"
)
_STRAIGHTFORWARD = [
    (r"(\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s@/]+@", re.I, rf"\1{MASK}@"),
    (rf"""(\b[\w-]*(?:{_NAMES})["']?\s*[:=]\s*["']?)[^\s"',;&]+""", re.I, rf"\1{MASK}"),
    (r"\b(Bearer|Basic)\s+(?=[\w.~+/=-]*\d)[\w.~+/=-]{8,}", re.I, rf"\1 {MASK}"),
    (
        r"\b(sk|rk|pk|gsk|xai|hf|gh[pousr]|github_pat|glpat)([-_])(?=[\w-]*\d)[\w-]{12,}",
        0,
        rf"\1\2{MASK}",
    ),
    (r"\bAIza[\w-]{30,}", 0, MASK),
    (r"\beyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]+", 0, MASK),
    (r"\b[0-9a-f]{32,}\b", re.I, MASK),
    (r"(?<![\w+/=-])(?=[\w+/-]*\d)(?=[\w+/-]*[a-z])(?=[\w+/-]*[A-Z])[\w+/-]{32,}=*", 0, MASK),
]


def straightforward(text: str) -> str:
    for pattern, flags, replacement in _STRAIGHTFORWARD:
        text = re.sub(pattern, replacement, text, flags=flags)
    return text


ORDINARY = [
    "Error code: 401 - {'error': {'message': 'Incorrect API key provided: sk-proj-abc123"
    "def456ghi789jkl. You can find your API key at https://platform.openai.com/account'}}",
    "could not connect to postgres://parley:s3cret-pw@db.internal:5432/parley (timeout)",
    "redis://:hunter2@cache:6379/0 and https://user@example.com/path:8080@x, ftp://a:b@c",
    'config {"api_key": "abc123", "password": \'p@ss w0rd\', secret_key=xyz; refresh-token: r1}',
    "X-Api-Key=sk-ant-api03-AbCdEf1234567890 Authorization: Bearer abc.def-ghi_jkl012345",
    "Basic dXNlcjpwYXNzd29yZA1= ghp_abcdefghijklmnopqrstuvwxyz0123 glpat-1234567890abcdefghij",
    "AIzaSyA1234567890abcdefghijklmnopqrstuv eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig_nat-ure",
    "request req_0123456789abcdef0123456789abcdef, uuid 550e8400-e29b-41d4-a716-446655440000",
    "digest 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 and "
    "dGhpcyBpcyBhIGxvbmcgYmFzZTY0IHN0cmluZyB3aXRoIDEyMyBkaWdpdHM= é-password=é1 x-sk-ab_1",
    "model 'llama-3.1-8b-instruct' not found; tokens 4096; try again in 20s (rate limit).",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_masked_as_the_straightforward_patterns_mask_it(text):
    assert mask_secrets(text) == straightforward(text)


def test_the_ordinary_texts_hold_secrets_to_mask():
    """The comparison above compares something: most of those texts have secrets masked."""
    assert sum(MASK in mask_secrets(text) for text in ORDINARY) >= 7


def test_random_text_is_masked_as_the_straightforward_patterns_mask_it():
    rng = random.Random(30)
    alphabets = ["sk-_ghp1aZ .", "eyJ.-_a1 ", "ab:/@s-+.1 ", "password=:\"' -_k1ey", "é-ſK_a1:/@ "]
    pieces = ["sk-", "ghp_", "eyJ", ".", "://", "@", ":", "password", "api_key", "secret_key"]
    pieces += ["-", "_", "=", " ", "a1", "Bearer ", "AIza", "x", "0123456789", "é", "A", '"']
    for _ in range(20_000):
        if rng.random() < 0.5:
            alphabet = rng.choice(alphabets)
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        else:
            text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 20)))
        assert mask_secrets(text) == straightforward(text), text

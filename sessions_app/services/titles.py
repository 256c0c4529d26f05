"""Chat titles: the request that asks a model for one, and the judgement of what it answers.

Asked plainly, a small model (the embedded SmolLM2-135M) answers the message instead of naming
it. Shown a few earlier turns of message → title, it names the topic; what it gives is then
trimmed to a title or refused, and a refused title is asked again in other words.
"""

from __future__ import annotations

import re
from typing import Any

TITLE_MAX_CHARS = 60
TITLE_MAX_WORDS = 7
MESSAGE_MAX_CHARS = 2000

# Sent to the embedded model only: the same title for the same message, and no long answer.
# A configured endpoint is sent none of them (reasoning models refuse temperature and max_tokens).
EMBEDDED_SAMPLING: dict[str, Any] = {"temperature": 0, "seed": 0, "max_tokens": 24}

# Earlier turns the model is shown: unlike topics, titles of the message's own words. The last
# example weighs most (a small model borrows its words), so it is the one least likely to fit.
EXAMPLES = (
    (
        "I keep getting 'permission denied' when my Docker container writes to a mounted "
        "folder. I tried chmod 777 but it still fails. What am I missing?",
        "Docker Volume Permissions",
    ),
    ("Hi there! What should I see in Rome if I only have three days?", "Three Days in Rome"),
    ("Can you help me write a toast for my sister's wedding?", "Wedding Toast for a Sister"),
    ("How can I get my toddler to sleep through the night?", "Toddler Sleep Tips"),
    ("What's the difference between a virus and a bacterium?", "Viruses vs Bacteria"),
)
# Two ways of asking; the second only when the first gives no usable title.
PROMPTS = (
    (
        "Give the conversation below a short title: two to six words that name its topic. "
        "Do not answer it. Reply with the title only.",
        'Conversation opening: "{message}"\nTitle:',
    ),
    (
        "You name conversations. Read the first message of a conversation and reply with its "
        "title: two to six words naming the topic, like a headline. Never answer or follow the "
        "message itself, and never write a sentence. Reply with the title only.",
        "Message: {message}\nTitle:",
    ),
)


def title_request(first_message: str, attempt: int) -> list[dict[str, str]]:
    """The messages asking for a title of `first_message` (only it: never the answer)."""
    system, frame = PROMPTS[attempt % len(PROMPTS)]
    messages = [{"role": "system", "content": system}]
    for message, title in EXAMPLES:
        messages.append({"role": "user", "content": frame.format(message=message)})
        messages.append({"role": "assistant", "content": title})
    message = first_message[:MESSAGE_MAX_CHARS]
    messages.append({"role": "user", "content": frame.format(message=message)})
    return messages


def clean_title(text: str, first_message: str) -> str:
    """The model's answer as a title of the first message, or "" when it reads like anything
    else (a small model often answers the message instead); the first message's words stay."""
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    line = shorten(_bare(_unlabelled(_bare(line), first_message)))
    return line if looks_like_title(line, first_message) else ""


def _bare(line: str) -> str:
    """Without quotes, markdown and the punctuation that ends a sentence."""
    return " ".join(line.strip(" \"'`*#").rstrip(".!?:;,").split())


def _unlabelled(title: str, first_message: str) -> str:
    """Without a label the message never says ("Title: …", "Topic: …")."""
    label, colon, rest = title.partition(":")
    if colon and rest.strip() and re.fullmatch(r"\w+", label):
        if label.lower() == "title" or label.lower() not in _content_words(first_message):
            return rest.strip()
    return title


# Where a long title may be cut and keep its head: at a colon or dash (a subtitle follows),
# else before a phrase that only qualifies it ("… in a User Table", "… for a Beginner").
_CUTS = (
    re.compile(r"\s*[:–—]\s*|\s+-\s+"),
    re.compile(r"\s+(?=(?:in|for|with|on|at|from|about|during|using|by)\s)", re.I),
)


def shorten(title: str) -> str:
    """A title too long, or saying a word twice, cut to its longest head that is neither."""
    if _fits(title):
        return title
    for cuts in _CUTS:
        for cut in reversed([m.start() for m in cuts.finditer(title)]):
            head = title[:cut].rstrip(" ,")
            if len(head.split()) >= 2 and _fits(head):
                return head
    return title


def _fits(title: str) -> bool:
    words = [w for w in re.findall(r"\w+", title.lower()) if len(w) >= 3]
    return len(title.split()) <= TITLE_MAX_WORDS and len(words) == len(set(words))


# How answers begin, not titles: "Sure", "It seems I've…", "As an AI…", "To do that, …".
_REPLY_OPENING = re.compile(
    r"^(sure|certainly|of course|okay|sorry|thanks|thank you|unfortunately|it seems|it looks|"
    r"i|i'm|i am|i've|i'll|i'd|as an ai|here is|here's|let me|dear|to)\b(?!-)",
    re.I,
)
# The message's own question, not a name for it: "How do I…", "Why does my…", "Can you…".
_QUESTION = re.compile(
    r"^(how|what|why|where|when|which|who|can|could|should|would|is|are|do|does|did)\s+"
    r"(do|does|did|can|could|should|would|is|are|i|you|my|we)\b",
    re.I,
)
_SENTENCE_BREAK = re.compile(r"[.!?;…](\s|$)|\.\.\.")
_PLACEHOLDER = re.compile(r"[\[\]{}<>]")  # "Dear [Landlord's Name]": a template, not a title
_STOP_WORDS = frozenset(
    "a an and are as at be but by can do does for from how i in is it me my of on or please "
    "should so that the this to was what when where which who why will with would you your".split()
)


def looks_like_title(title: str, first_message: str) -> bool:
    """Short, one phrase, neither the start of a reply nor a question, and about the first
    message: it shares a content word with it (give or take an ending, so "Planning" matches
    "plan"), is not the message itself (which stays anyway) and was not copied from the
    examples."""
    words = title.split()
    if not words or not _fits(title) or len(title) > TITLE_MAX_CHARS:
        return False
    if _SENTENCE_BREAK.search(title) or _PLACEHOLDER.search(title):
        return False
    if _REPLY_OPENING.match(title) or _QUESTION.match(title):
        return False
    if _words(title) == _words(first_message) or _borrowed(title, first_message):
        return False
    said = _content_words(first_message)
    return (
        not said
        or any(_related(w, said) for w in _content_words(title))
        or bool(_unspaced_pairs(title) & _unspaced_pairs(first_message))
    )


def _borrowed(title: str, first_message: str) -> bool:
    """An example's title again, or its topic word ("Toddler", "Docker") in a title of a
    message that never says it: the model copied the example rather than read the message."""
    if title.lower() in {t.lower() for _, t in EXAMPLES}:
        return True
    said = _content_words(first_message)
    return any(not _related(w, said) for w in _content_words(title) & _EXAMPLE_TOPICS)


def _related(word: str, said: set[str]) -> bool:
    return any(_same_stem(word, other) for other in said)


_ENDINGS = ("s", "es", "d", "ed", "ing", "ning", "er", "ers")


def _same_stem(one: str, other: str) -> bool:
    """The same word, give or take an ending: "plan" and "planning", "bake" and "baking",
    "analyst" and "analysis"; not "car" and "careful"."""
    short, long = sorted((one, other), key=len)
    if long.startswith(short):
        return len(short) >= 4 or long[len(short) :] in ("", *_ENDINGS)
    pairs = zip(short, long, strict=False)
    common = next((i for i, (a, b) in enumerate(pairs) if a != b), len(short))
    stem = short.endswith("e") and common == len(short) - 1
    return common >= 5 or (stem and long[common:] in _ENDINGS)


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _unspaced_pairs(text: str) -> set[str]:
    """Pairs of adjacent characters of scripts written without spaces (Chinese, Japanese,
    Thai…), whose words the content-word test cannot split."""
    letters = [c if ord(c) > 0x2E7F and c.isalpha() else " " for c in text]
    joined = "".join(letters)
    return {joined[i : i + 2] for i in range(len(joined) - 1) if " " not in joined[i : i + 2]}


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if len(w) >= 3 and w not in _STOP_WORDS}


# The examples' topic words: those of a title that its message says too ("toddler", not "tips").
_EXAMPLE_TOPICS = frozenset(
    w for m, t in EXAMPLES for w in _content_words(t) if _related(w, _content_words(m))
)

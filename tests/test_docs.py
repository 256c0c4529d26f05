"""The README and docs/ as a reader finds them: short enough to read, links that lead somewhere,
and every setting Parley reads written down."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings

from tests.conftest import ROOT

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
README_MAX_LINES = 300

FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$", re.MULTILINE)


def prose(text: str) -> str:
    """The text without code blocks and inline code, where brackets are not links."""
    return CODE.sub("", FENCE.sub("", text))


def anchor(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation dropped, spaces as hyphens."""
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = name = anchor(heading)
        n = 0
        while name in found:  # GitHub numbers repeated headings: name, name-1, name-2
            n += 1
            name = f"{base}-{n}"
        found.add(name)
    return found


def relative_links(path: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(prose(path.read_text(encoding="utf-8")))
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


def test_the_readme_is_at_most_300_lines():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move details to docs/"


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page: Path):
    broken = []
    for target in relative_links(page):
        file_part, _, fragment = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no heading #{fragment} in {linked.name}")
    assert not broken, f"{page.name}: {broken}"


def test_the_link_check_sees_links_and_only_links(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\nSee [there](missing.md), [here](#a-page), [a site](https://example.com)"
        " and [nowhere](#no-such-heading).\n\n```\n[code](not-a-link.md)\n```\n"
        '`{"data": [x](y)}`\n',
        encoding="utf-8",
    )
    assert relative_links(page) == ["missing.md", "#a-page", "#no-such-heading"]
    assert anchors(page) == {"a-page"}
    assert anchor("`serve` and the *workers*: 2, 3") == "serve-and-the-workers-2-3"


def test_every_setting_parley_reads_is_in_docs_settings():
    """settings.md is the full list; a setting added to project/settings.py is listed there."""
    listed = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    read = settings.ENVIRONMENT_NAMES | {"HOST", "PORT"}  # serve's own options
    missing = sorted(name for name in read if f"`{name}`" not in listed)
    assert not missing, f"not in docs/settings.md: {missing}"


def test_the_readme_gives_the_two_commands_and_links_the_whole_story():
    readme = README.read_text(encoding="utf-8")
    assert "make run" in readme and "make test" in readme
    for page in ("settings.md", "deployment.md", "security.md", "testing.md", "api.md"):
        assert f"(docs/{page}" in readme, page

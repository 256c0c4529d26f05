"""Links other apps add to a conversation's header for its owner (share links), so this app
never names them. Filled as those apps load (their AppConfig.ready)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sessions_app.models import Session


@dataclass(frozen=True)
class ConversationLink:
    label: str
    testid: str  # its data-testid
    url: Callable[[Session], str]


_links: list[ConversationLink] = []


def add_conversation_link(link: ConversationLink) -> None:
    """Adding a link with the same testid again replaces it."""
    _links[:] = [known for known in _links if known.testid != link.testid] + [link]


def links_for(session: Session, own: bool) -> list[dict[str, str]]:
    """The header's extra links for this session: its owner's only."""
    if not own:
        return []
    return [{"label": k.label, "testid": k.testid, "url": k.url(session)} for k in _links]

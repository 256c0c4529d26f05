"""Model output to safe HTML: Markdown rendered on the server, highlighted, then sanitized.

Raw HTML in the model's text is never passed through: markdown-it escapes it (html=False), and nh3
removes anything outside a small allow-list as a second line of defence.
"""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

_FORMATTER = HtmlFormatter(nowrap=True)
ALLOWED_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td", "span",
    "div",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "span": {"class"},
    "code": {"class"},
    "div": {"class"},
    "th": {"style"},
    "td": {"style"},
    "ol": {"start"},
}


def _highlight(code: str, lang: str, attrs: str) -> str:
    try:
        lexer = get_lexer_by_name(lang) if lang else TextLexer()
    except ClassNotFound:
        lexer = TextLexer()
    return (
        f'<pre><code class="highlight language-{lexer.aliases[0] if lexer.aliases else "text"}">'
        f"{highlight(code, lexer, _FORMATTER)}</code></pre>"
    )


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "highlight": _highlight})
    return md.enable(["table", "strikethrough"])


def render_markdown(text: str) -> str:
    html = _parser().render(text or "")
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        filter_style_properties={"text-align"},
    )


def highlight_css() -> str:
    return _FORMATTER.get_style_defs(".highlight")

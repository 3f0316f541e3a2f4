"""Template tags for the Cortex UI: icons, navigation, badges, times and small charts.

Everything here returns markup built with `format_html`, so user-supplied strings
(scope names, clearance names, sources) are always escaped. No tag emits script:
behaviour lives in static/js/cortex.js (the CSP allows only same-origin script files).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from datetime import date, datetime
from typing import Any

from django import template
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince, timeuntil

register = template.Library()

# Stroke icons on a 24×24 grid, drawn for Cortex (1.75px strokes, round joins).
# Each entry is a tuple of SVG child elements; keep them geometric and simple.
_ICONS: dict[str, tuple[str, ...]] = {
    "home": ('<path d="M3.5 10.5 12 3.5l8.5 7"/>', '<path d="M5.5 9v10.5a1 1 0 0 0 1 1H10v-6h4v6h3.5a1 1 0 0 0 1-1V9"/>'),
    "memories": (
        '<path d="m12 3.5-9 4.75L12 13l9-4.75z"/>',
        '<path d="m3 12.25 9 4.75 9-4.75"/>',
        '<path d="m3 16.25 9 4.75 9-4.75"/>',
    ),
    "plus": ('<path d="M12 5v14M5 12h14"/>',),
    "conflicts": (
        '<path d="M3 12h5.5"/>',
        '<path d="m6 9 3 3-3 3"/>',
        '<path d="M21 12h-5.5"/>',
        '<path d="m18 9-3 3 3 3"/>',
        '<path d="M12 5v14"/>',
    ),
    "connectors": ('<path d="M9 3.5V8M15 3.5V8"/>', '<path d="M6.5 8h11v3a5.5 5.5 0 0 1-11 0z"/>', '<path d="M12 16.5v4"/>'),
    "audit": (
        '<path d="M12 3 4.5 6v5.5c0 4.6 3.2 8.1 7.5 9.5 4.3-1.4 7.5-4.9 7.5-9.5V6z"/>',
        '<path d="m9 12 2.2 2.2L15.5 10"/>',
    ),
    "settings": (
        '<path d="M4 6.5h9M17 6.5h3M4 12h3M11 12h9M4 17.5h11M19 17.5h1"/>',
        '<circle cx="15" cy="6.5" r="2"/>',
        '<circle cx="9" cy="12" r="2"/>',
        '<circle cx="17" cy="17.5" r="2"/>',
    ),
    "search": ('<circle cx="11" cy="11" r="6.5"/>', '<path d="m20 20-4.2-4.2"/>'),
    "chevron-down": ('<path d="m7 10 5 5 5-5"/>',),
    "chevron-right": ('<path d="m10 7 5 5-5 5"/>',),
    "chevron-left": ('<path d="m14 7-5 5 5 5"/>',),
    "arrow-left": ('<path d="M19 12H5"/>', '<path d="m11 6-6 6 6 6"/>'),
    "arrow-right": ('<path d="M5 12h14"/>', '<path d="m13 6 6 6-6 6"/>'),
    "logout": ('<path d="M15 4h3a2 2 0 0 1 2 2v12a2 2 0 0 1-2 2h-3"/>', '<path d="m10 8-4 4 4 4"/>', '<path d="M6 12h10"/>'),
    "user": ('<circle cx="12" cy="8" r="4"/>', '<path d="M4.5 20.5c.8-3.8 3.8-6 7.5-6s6.7 2.2 7.5 6"/>'),
    "users": (
        '<circle cx="9" cy="8.5" r="3.5"/>',
        '<path d="M2.5 20c.6-3.3 3.2-5.5 6.5-5.5s5.9 2.2 6.5 5.5"/>',
        '<path d="M15.5 5.2a3.5 3.5 0 0 1 0 6.6M18 14.8c1.9.8 3.2 2.6 3.5 5.2"/>',
    ),
    "check": ('<path d="m5 12.5 4.5 4.5L19 7.5"/>',),
    "copy": (
        '<rect x="9" y="9" width="11" height="11" rx="2"/>',
        '<path d="M15 9V5a1 1 0 0 0-1-1H5a1 1 0 0 0-1 1v9a1 1 0 0 0 1 1h4"/>',
    ),
    "x": ('<path d="M6.5 6.5l11 11M17.5 6.5l-11 11"/>',),
    "info": ('<circle cx="12" cy="12" r="9"/>', '<path d="M12 11v5.5"/>', '<path d="M12 7.75h.01"/>'),
    "alert": ('<circle cx="12" cy="12" r="9"/>', '<path d="M12 7.5v5.5"/>', '<path d="M12 16.25h.01"/>'),
    "check-circle": ('<circle cx="12" cy="12" r="9"/>', '<path d="m8.5 12.25 2.5 2.5 4.5-5"/>'),
    "warning": (
        '<path d="M10.3 4.2 2.9 17.5A2 2 0 0 0 4.6 20.5h14.8a2 2 0 0 0 1.7-3L13.7 4.2a2 2 0 0 0-3.4 0z"/>',
        '<path d="M12 9.5v4"/>',
        '<path d="M12 17h.01"/>',
    ),
    "lock": ('<rect x="5" y="11" width="14" height="9.5" rx="2"/>', '<path d="M8.5 11V8a3.5 3.5 0 0 1 7 0v3"/>'),
    "external": (
        '<path d="M14 4h6v6"/>',
        '<path d="m20 4-9 9"/>',
        '<path d="M18 14v5a1 1 0 0 1-1 1H5a1 1 0 0 1-1-1V7a1 1 0 0 1 1-1h5"/>',
    ),
    "clock": ('<circle cx="12" cy="12" r="9"/>', '<path d="M12 7.5V12l3 2"/>'),
    "tag": (
        '<path d="M3.5 12.1V4.5a1 1 0 0 1 1-1h7.6l8.4 8.4a1 1 0 0 1 0 1.4l-7.2 7.2a1 1 0 0 1-1.4 0z"/>',
        '<circle cx="8" cy="8" r="1.5"/>',
    ),
    "inbox": ('<path d="M3.5 13h5l1.5 3h4l1.5-3h5"/>', '<path d="M6 5h12l2.5 8v5.5a1 1 0 0 1-1 1h-15a1 1 0 0 1-1-1V13z"/>'),
    "folder": (
        '<path d="M3.5 7a1.5 1.5 0 0 1 1.5-1.5h4l2 2h8a1.5 1.5 0 0 1 '
        '1.5 1.5v8.5a1.5 1.5 0 0 1-1.5 1.5H5A1.5 1.5 0 0 1 3.5 17.5z"/>',
    ),
    "trash": (
        '<path d="M4.5 7h15"/>',
        '<path d="M10 11v6M14 11v6"/>',
        '<path d="m6.5 7 .8 12.1a1.5 1.5 0 0 0 1.5 1.4h6.4a1.5 1.5 0 0 0 1.5-1.4L17.5 7"/>',
        '<path d="M9.5 7V4.5h5V7"/>',
    ),
    "edit": ('<path d="M4 20h4L19 9a2.1 2.1 0 0 0-3-3L5 17z"/>', '<path d="m14.5 7.5 2 2"/>'),
    "more": ('<circle cx="6" cy="12" r="1.25"/>', '<circle cx="12" cy="12" r="1.25"/>', '<circle cx="18" cy="12" r="1.25"/>'),
    "sparkle": (
        '<path d="M12 3.5c.6 4.3 2.2 5.9 6.5 6.5-4.3.6-5.9 2.2-6.5 6.5-.6-4.3-2.2-5.9-6.5-6.5 4.3-.6 5.9-2.2 6.5-6.5z"/>',
        '<path d="M18.5 15.5c.3 1.6.9 2.2 2.5 2.5-1.6.3-2.2.9-2.5 2.5-.3-1.6-.9-2.2-2.5-2.5 1.6-.3 2.2-.9 2.5-2.5z"/>',
    ),
    "key": ('<circle cx="8" cy="15" r="4"/>', '<path d="m11 12 8.5-8.5M16.5 6.5l2.5 2.5M14 9l2 2"/>'),
    "refresh": (
        '<path d="M20 11.5A8 8 0 0 0 6 6.5L4 8.5"/>',
        '<path d="M4 4v4.5h4.5"/>',
        '<path d="M4 12.5a8 8 0 0 0 14 5l2-2"/>',
        '<path d="M20 20v-4.5h-4.5"/>',
    ),
    "filter": ('<path d="M4 5.5h16l-6.2 7.3v5.7l-3.6 1.5v-7.2z"/>',),
    "link": (
        '<path d="M10 14a4 4 0 0 0 5.7 0l3.1-3.1a4 4 0 0 0-5.7-5.7l-1.3 1.3"/>',
        '<path d="M14 10a4 4 0 0 0-5.7 0l-3.1 3.1a4 4 0 0 0 5.7 5.7l1.3-1.3"/>',
    ),
    "history": ('<path d="M4 12a8 8 0 1 0 2.4-5.7L4 8.5"/>', '<path d="M4 4v4.5h4.5"/>', '<path d="M12 8v4.5l3 1.5"/>'),
    "eye-off": (
        '<path d="M3.5 3.5l17 17"/>',
        '<path d="M10.6 6.1A9.6 9.6 0 0 1 12 6c5 0 8.5 4.5 9.5 6a15.6 15.6 0 0 1-2.9 '
        '3.4M6.4 7.6A15.4 15.4 0 0 0 2.5 12c1 1.5 4.5 6 9.5 6 1.6 0 3-.4 4.3-1.1"/>',
        '<path d="M9.9 10a3 3 0 0 0 4.2 4.2"/>',
    ),
    # sources
    "github": (
        '<circle cx="6.5" cy="5.5" r="2"/>',
        '<circle cx="6.5" cy="18.5" r="2"/>',
        '<circle cx="17.5" cy="18.5" r="2"/>',
        '<path d="M6.5 7.5v9"/>',
        '<path d="M17.5 16.5V10a2.5 2.5 0 0 0-2.5-2.5h-3.5"/>',
        '<path d="m13.5 5.5-2 2 2 2"/>',
    ),
    "slack": ('<path d="M9.5 3.5 7.5 20.5M16.5 3.5l-2 17M4 9h16.5M3.5 15H20"/>',),
    "gmail": ('<rect x="3" y="5" width="18" height="14" rx="2"/>', '<path d="m3.5 6.5 8.5 6.5 8.5-6.5"/>'),
    "drive": ('<path d="M8.6 4h6.8l6.1 10.5-3.3 5.5H5.8l-3.3-5.5z"/>', '<path d="M2.5 14.5h19M8.6 4l6.2 10.5M15.4 4 9 14.5"/>'),
    "notion": ('<rect x="4" y="3.5" width="16" height="17" rx="2.5"/>', '<path d="M9 16V8l6 8V8"/>'),
    "mcp": (
        '<rect x="4.5" y="8" width="15" height="11.5" rx="3"/>',
        '<path d="M12 8V4.5"/>',
        '<circle cx="12" cy="3.75" r=".75"/>',
        '<path d="M9.5 13v1.5M14.5 13v1.5"/>',
        '<path d="M2.5 12.5v3M21.5 12.5v3"/>',
    ),
    "manual": ('<path d="M4 20h4L19 9a2.1 2.1 0 0 0-3-3L5 17z"/>', '<path d="m14.5 7.5 2 2"/>'),
    "meeting": (
        '<rect x="3.5" y="5" width="17" height="15.5" rx="2"/>',
        '<path d="M3.5 10h17M8 3v4M16 3v4"/>',
        '<path d="M8 14h3"/>',
    ),
    "upload": (
        '<path d="M12 15.5V4.5"/>',
        '<path d="m7.5 9 4.5-4.5L16.5 9"/>',
        '<path d="M4.5 15v3.5a1.5 1.5 0 0 0 1.5 1.5h12a1.5 1.5 0 0 0 1.5-1.5V15"/>',
    ),
    "api": ('<path d="m8 7.5-4.5 4.5L8 16.5M16 7.5l4.5 4.5-4.5 4.5"/>', '<path d="m13.5 5-3 14"/>'),
    "file": ('<path d="M13.5 3.5H6.5a1 1 0 0 0-1 1v15a1 1 0 0 0 1 1h11a1 1 0 0 0 1-1V8.5z"/>', '<path d="M13.5 3.5v5h5"/>'),
}

# What each source is called, keyed by normalised name (lowercase, no spaces, dashes, underscores).
_SOURCES: dict[str, tuple[str, str]] = {
    "github": ("github", "GitHub"),
    "slack": ("slack", "Slack"),
    "gmail": ("gmail", "Gmail"),
    "email": ("gmail", "Email"),
    "googledrive": ("drive", "Google Drive"),
    "gdrive": ("drive", "Google Drive"),
    "drive": ("drive", "Google Drive"),
    "notion": ("notion", "Notion"),
    "mcp": ("mcp", "MCP"),
    "agent": ("mcp", "MCP"),
    "manual": ("manual", "Manual"),
    "ui": ("manual", "Manual"),
    "meeting": ("meeting", "Meeting"),
    "meetings": ("meeting", "Meeting"),
    "upload": ("upload", "Upload"),
    "import": ("upload", "Upload"),
    "api": ("api", "API"),
    "rest": ("api", "API"),
}

# Default ladder rungs get their own colour; custom rung names fall back to the generic badge.
_CLEARANCE_CLASSES = {"contractor", "employee", "manager", "executive"}


def _svg(name: str, size: int, label: str = "", css_class: str = "") -> SafeString:
    children = _ICONS.get(name) or _ICONS["file"]
    a11y = format_html('role="img" aria-label="{}"', label) if label else mark_safe('aria-hidden="true" focusable="false"')
    return format_html(
        '<svg class="icon{}" width="{}" height="{}" viewBox="0 0 24 24" fill="none" stroke="currentColor" '
        'stroke-width="1.75" stroke-linecap="round" stroke-linejoin="round" {}>{}</svg>',
        f" {css_class}" if css_class else "",
        size,
        size,
        a11y,
        mark_safe("".join(children)),  # noqa: S308 -- constant markup from _ICONS above, never user input
    )


@register.simple_tag
def icon(name: str, size: int = 16, label: str = "", css_class: str = "") -> SafeString:
    """`{% icon "search" %}` → an inline SVG. Decorative (aria-hidden) unless `label` is given."""
    return _svg(name, size, label, css_class)


def _path_is_current(path: str, href: str, exact: bool, exclude: str) -> bool:
    if exact or href == "/":
        return path == href
    if exclude and any(path.startswith(prefix) for prefix in exclude.split(",") if prefix):
        return False
    return path.startswith(href)


@register.simple_tag(takes_context=True)
def nav_link(
    context: template.Context, href: str, label: str, icon: str = "", exact: bool = False, exclude: str = ""
) -> SafeString:
    """A sidebar link, marked `aria-current="page"` when the request path is under `href`.

    "/" matches only itself; `exclude="/memories/new/"` keeps a parent from lighting up
    on a child that has its own nav item; `exact=True` disables prefix matching.
    """
    request = context.get("request")
    path = getattr(request, "path", "") or ""
    current = _path_is_current(path, href, exact, exclude)
    return format_html(
        '<a class="nav-link" href="{}"{}>{}<span>{}</span></a>',
        href,
        mark_safe(' aria-current="page"') if current else "",
        _svg(icon, 16) if icon else "",
        label,
    )


@register.filter
def clearance_class(name: Any) -> str:
    """The CSS class for a clearance rung name: `clearance-employee`, or `clearance-other`."""
    key = str(name or "").strip().lower()
    return f"clearance-{key}" if key in _CLEARANCE_CLASSES else "clearance-other"


@register.filter
def clearance_badge(name: Any) -> SafeString:
    """`{{ principal.clearance|clearance_badge }}` → a coloured badge naming the rung."""
    if name in (None, ""):
        return mark_safe("")
    return format_html(
        '<span class="badge badge-clearance {}" title="Clearance: {}"><span class="badge-dot" aria-hidden="true"></span>'
        '<span class="visually-hidden">Clearance: </span>{}</span>',
        clearance_class(name),
        name,
        name,
    )


@register.filter
def scope_badge(scope: Any) -> SafeString:
    """`{{ memory.scope|scope_badge }}` (a Scope or a slug) → a scope label with a folder glyph."""
    if scope in (None, ""):
        return mark_safe("")
    slug = getattr(scope, "slug", scope)
    title = getattr(scope, "name", "") or slug
    return format_html(
        '<span class="badge badge-scope" title="Scope: {}">{}<span class="visually-hidden">Scope: </span>{}</span>',
        title,
        _svg("folder", 12),
        slug,
    )


def _normalise_source(source: Any) -> tuple[str, str]:
    raw = str(getattr(source, "label", source) or "").strip()
    key = re.sub(r"[\s_\-]+", "", raw.lower())
    if key in _SOURCES:
        return _SOURCES[key]
    return ("file", raw or "Unknown source")


@register.filter
def source_icon(source: Any, show_label: Any = None) -> SafeString:
    """`{{ memory.source|source_icon }}` → a tinted glyph for GitHub, Slack, Gmail, Google Drive,
    Notion, MCP, Manual, Meeting, Upload or API (a document glyph otherwise).

    Icon only: decorative, with the name in `title` — print the source name next to it.
    `{{ memory.source|source_icon:"label" }}` prints the name after the glyph.
    """
    glyph, name = _normalise_source(source)
    css = "other" if glyph == "file" else glyph
    badge = format_html('<span class="source-icon source-{}" title="{}" aria-hidden="true">{}</span>', css, name, _svg(glyph, 14))
    if show_label:
        return format_html('<span class="source-label">{}<span>{}</span></span>', badge, name)
    return badge


@register.filter
def source_name(source: Any) -> str:
    """The display name of a source (`gdrive` → "Google Drive")."""
    return _normalise_source(source)[1]


def _as_datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day, tzinfo=timezone.get_current_timezone())
    elif isinstance(value, str) and value:
        parsed = parse_datetime(value)
        if parsed is None:
            return None
        moment = parsed
    else:
        return None
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment, timezone.get_current_timezone())
    return moment


def relative_text(moment: datetime, now: datetime | None = None) -> str:
    """ "3 days ago" / "in 2 hours" / "just now" — the server-side text JS later refreshes."""
    now = now or timezone.now()
    delta = (now - moment).total_seconds()
    if abs(delta) < 60:
        return "just now"
    if delta > 0:
        return f"{timesince(moment, now, depth=1)} ago"
    return f"in {timeuntil(moment, now, depth=1)}"


@register.filter
def relative_time(value: Any) -> SafeString:
    """`{{ memory.valid_from|relative_time }}` → `<time datetime=… data-relative title=absolute>3 days ago</time>`.

    cortex.js keeps the text fresh in the reader's locale; without JS the server text stays.
    Empty values render an em dash.
    """
    moment = _as_datetime(value)
    if moment is None:
        return format_html('<span class="subtle">{}</span>', "—")
    local = timezone.localtime(moment)
    absolute = f"{local.day} {local:%b %Y, %H:%M %Z}"
    return format_html(
        '<time datetime="{}" title="{}" data-relative>{}</time>',
        moment.isoformat(),
        absolute,
        relative_text(moment),
    )


@register.filter
def initials(name: Any) -> str:
    """Up to two initials for an avatar: "Ada Lovelace" → "AL", "ada" → "AD"."""
    words = [w for w in re.split(r"[\s._@-]+", str(name or "")) if w]
    if not words:
        return "?"
    if len(words) == 1:
        return words[0][:2].upper()
    return (words[0][0] + words[-1][0]).upper()


def _unit(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return min(max(number, 0.0), 1.0)


@register.simple_tag
def score_bar(score: Any, relevance: Any, recency: Any, wide: bool = False) -> SafeString:
    """`{% score_bar hit.score hit.relevance hit.recency %}` → the score with a stacked bar
    (0.7·relevance in the accent, 0.3·recency in teal) and a legend."""
    return render_to_string(
        "components/score_bar.html",
        {"score": _unit(score), "relevance": _unit(relevance), "recency": _unit(recency), "wide": wide},
    )


@register.simple_tag
def sparkline(values: Iterable[Any], label: str = "", large: bool = False) -> SafeString:
    """`{% sparkline counts label="Memories per day, last 14 days" %}` → tiny bars scaled to the max."""
    numbers = [max(float(v or 0), 0.0) for v in values]
    peak = max(numbers, default=0.0) or 1.0
    bars = format_html_join(
        "",
        '<span class="spark-bar{}" style="--h: {}%" title="{}"></span>',
        ((" is-zero" if n == 0 else "", round(n / peak * 100, 1), f"{n:g}") for n in numbers),
    )
    summary = label or "Trend"
    if numbers:
        summary = f"{summary}: {', '.join(f'{n:g}' for n in numbers)}"
    return format_html('<span class="spark{}" role="img" aria-label="{}">{}</span>', " spark-lg" if large else "", summary, bars)


@register.filter
def percent(value: Any) -> str:
    """0.823 → "82%" (for labels next to bars)."""
    return f"{round(_unit(value) * 100)}%"


# --- memory content: Markdown and highlighted snippets -----------------------------------------------

_MARKDOWN_TAGS = {
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "code",
    "dd",
    "del",
    "details",
    "dl",
    "dt",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "kbd",
    "li",
    "ol",
    "p",
    "pre",
    "s",
    "strong",
    "sub",
    "summary",
    "sup",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
    "ul",
}
_MARKDOWN_ATTRIBUTES = {"a": {"href", "title"}, "th": {"align"}, "td": {"align"}, "ol": {"start"}, "abbr": {"title"}}


@functools.cache
def _markdown_parser() -> Any:
    from markdown_it import MarkdownIt

    # Raw HTML in the source is shown as text, never interpreted; nh3 below is the second wall.
    # `breaks`: a single line break is kept, as Slack, e-mail and a transcript's speaker turns mean it.
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False, "breaks": True}).enable(
        ["table", "strikethrough"]
    )


def render_markdown(text: str, *, demote: int = 1) -> SafeString:
    """Memory content as sanitised HTML: Markdown → HTML (raw HTML escaped) → nh3 allow-list.

    Links keep only http(s)/mailto targets and get rel="noopener noreferrer nofollow"; images
    are dropped (they would load third-party content and the CSP refuses them anyway).
    Headings move down `demote` levels: the page's own <h1> is the memory's title.
    """
    import nh3

    parser = _markdown_parser()
    tokens = parser.parse(str(text or ""))
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(int(token.tag[1]) + demote, 6)}"
    html = parser.renderer.render(tokens, parser.options, {})
    cleaned = nh3.clean(
        html,
        tags=_MARKDOWN_TAGS,
        clean_content_tags={"script", "style"},
        attributes=_MARKDOWN_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(cleaned)  # noqa: S308 -- sanitised by nh3 with the allow-list above


@register.filter(name="markdown")
def markdown_filter(text: Any) -> SafeString:
    """`{{ memory.content|markdown }}` → safe HTML (see `render_markdown`)."""
    return render_markdown(str(text or ""))


def without_title_heading(content: str, title: str) -> str:
    """The content without a leading `# heading` that only repeats the title shown above it."""
    lines = content.lstrip("\n").split("\n", 1)
    first = lines[0].strip()
    if first.startswith("# ") and " ".join(first[2:].split()).casefold() == " ".join(title.split()).casefold():
        return lines[1] if len(lines) > 1 else ""
    return content


@register.filter(name="memory_markdown")
def memory_markdown_filter(memory: Any) -> SafeString:
    """`{{ memory|memory_markdown }}`: its content as safe HTML, minus a first heading equal to its title."""
    return render_markdown(without_title_heading(str(memory.content or ""), str(memory.title or "")))


def highlight_terms(text: str, terms: Iterable[str]) -> SafeString:
    """Escape `text` and wrap each word starting with a term (case-insensitive) in <mark>.

    Matching at word starts only: "rate" marks "rate" and "rates", never "generate".
    """
    words = sorted({t for t in terms if t and len(t) > 1}, key=len, reverse=True)
    if not words:
        return format_html("{}", text)
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(w) for w in words) + r")\w*", re.IGNORECASE)
    parts: list[str] = []
    position = 0
    for match in pattern.finditer(text):
        parts.append(str(format_html("{}", text[position : match.start()])))
        parts.append(str(format_html("<mark>{}</mark>", match.group(0))))
        position = match.end()
    parts.append(str(format_html("{}", text[position:])))
    return mark_safe("".join(parts))  # noqa: S308 -- every piece escaped by format_html above


_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MD_MARKS = re.compile(r"(\*\*|__|`+|~~)")
_MD_LINE_START = re.compile(r"(^|\n)\s{0,3}(?:#{1,6}\s+|>\s?|[-*+]\s+(?=\S))")


def plain_text(markdown: str) -> str:
    """Markdown reduced to readable plain text for one-line snippets (links keep their text)."""
    text = _MD_LINK.sub(r"\1", markdown)
    text = _MD_LINE_START.sub(r"\1", text)
    text = _MD_MARKS.sub("", text)
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r" [-*+] (?=\S)", " · ", text)  # list items folded onto one line


@register.filter
def highlight(text: Any, query: Any) -> SafeString:
    """`{{ hit.snippet|highlight:q }}` → the snippet, escaped, with the query's terms marked."""
    from memories.retrieval.terms import query_terms

    return highlight_terms(str(text or ""), query_terms(str(query or "")))


@register.filter
def times(value: Any, factor: Any) -> float:
    """`{{ hit.relevance|times:0.7 }}` — for showing the parts of a weighted score."""
    try:
        return float(value) * float(factor)
    except (TypeError, ValueError):
        return 0.0


@register.filter
def percent_of(value: Any, peak: Any) -> float:
    """`{{ count|percent_of:largest }}` → 0–100, for bar widths."""
    try:
        return round(min(max(float(value) / float(peak), 0.0), 1.0) * 100, 1) if float(peak) else 0.0
    except (TypeError, ValueError):
        return 0.0


@register.filter
def source_key(source: Any) -> str:
    """The CSS key of a source's colour (`source-<key>`): github, slack, … or "other"."""
    glyph = _normalise_source(source)[0]
    return "other" if glyph == "file" else glyph

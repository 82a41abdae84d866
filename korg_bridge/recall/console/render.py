"""Turning the service layer's answers into HTML: one Jinja2 environment, autoescape on for every
template, and the filters that show stored text as data.

Everything a memory, a history event, a title, a tag or a Claude Code topic file says was written
by an agent or a web page, so it is hostile. Autoescaping makes ``<script>`` and ``"><img …>``
inert; :func:`shown_text` also makes the characters escaping does not touch visible: bidi overrides
(which would reorder what a person reads), zero-width and other invisible format characters, and
C0/C1 controls each become a small marked ``U+XXXX`` instead of acting on the page. Nothing is ever
rendered as Markdown, so ``[x](javascript:…)`` stays the text it is; links the console makes are
built from ids it checked, never from stored text. The page itself loads only this package's own
CSS and JavaScript (``/static/``, a content hash in the URL so a new version is never served
from a stale cache), as the Content-Security-Policy ``default-src 'self'`` demands.
"""

from __future__ import annotations

import functools
import hashlib
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse

from korg_bridge.auth.identity import SCOPE_KEY
from korg_bridge.errors import KorgError
from korg_bridge.recall.console.security import CSRF_FIELD, csrf_token
from korg_bridge.recall.console.services import Caller, Console, http_status

__all__ = [
    "DONE",
    "STATIC_DIR",
    "TEMPLATE_DIR",
    "caller_of",
    "console_of",
    "environment",
    "error_page",
    "form_of",
    "number",
    "render",
    "render_page",
    "see_other",
    "shown_text",
    "static_url",
]

HERE = Path(__file__).resolve().parent
TEMPLATE_DIR = HERE / "templates"
STATIC_DIR = HERE / "static"
STATIC_PREFIX = "/static/"

_KEEP = frozenset("\n\t")
"""Controls that lay out text as written (``white-space: pre-wrap`` shows them); every other
control or format character is made visible."""


def _visible(char: str) -> bool:
    """Whether ``char`` is shown as itself: not a control (Cc), format (Cf: bidi overrides and
    isolates, zero-width joiners, the BOM …), line/paragraph separator or private-use character."""
    if char in _KEEP:
        return True
    return unicodedata.category(char) not in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs")


def shown_text(value: object) -> Markup:
    """``value`` as HTML text: escaped, with invisible and layout-changing characters shown as
    ``U+XXXX`` marks so a bidi override cannot disguise what a memory says."""
    text = "" if value is None else str(value)
    if all(_visible(char) for char in text):
        return escape(text)
    parts: list[str] = []
    for char in text:
        if _visible(char):
            parts.append(str(escape(char)))
        else:
            parts.append(f'<span class="ctl" title="invisible character">U+{ord(char):04X}</span>')
    return Markup("".join(parts))


def number(value: object) -> str:
    """A score for a person: three decimals, or the value as it is when it is no number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "" if value is None else str(value)
    return f"{value:.3f}" if isinstance(value, float) else str(value)


@functools.cache
def _digest(name: str) -> str:
    path = STATIC_DIR / name
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    except OSError:
        return "0"


def static_url(name: str) -> str:
    """The URL of one of the console's own assets, versioned by its content."""
    return f"{STATIC_PREFIX}{name}?v={_digest(name)}"


@functools.cache
def environment() -> Environment:
    """The one template environment: autoescape on for every template whatever its name (not
    chosen by file extension, so no template can opt out by being named differently)."""
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATE_DIR)),
        autoescape=True,
        trim_blocks=False,
        lstrip_blocks=False,
        auto_reload=False,
    )
    env.filters["text"] = shown_text
    env.filters["number"] = number
    env.globals["static"] = static_url
    return env


def render(name: str, context: Mapping[str, Any]) -> str:
    """The HTML of template ``name`` with ``context``."""
    return environment().get_template(name).render(**context)


DONE = {
    "remembered": "Remembered.",
    "revised": "Saved as a new version.",
    "unchanged": "Nothing changed: the text and settings are as they were.",
    "pinned": "Pinned.",
    "unpinned": "Unpinned.",
    "retired": "Retired: hidden from recall and briefs; restore brings it back.",
    "restored": "Restored as a new live version.",
    "purged": "Purged: every version's text is gone.",
    "reviewed": "Marked as reviewed.",
    "approved": "Approved.",
    "rejected": "Rejected.",
}
"""The notices a redirect may ask for: fixed texts, chosen by code."""


def console_of(request: Request) -> Console:
    """The server's one :class:`Console` (warm stores and index)."""
    console: Console = request.app.state.console
    return console


def caller_of(request: Request) -> Caller:
    """Who is asking: the token's tenant and actor as the auth gate found them, else the person."""
    return Caller.of(request.scope.get(SCOPE_KEY))


def render_page(
    request: Request,
    template: str,
    context: Mapping[str, Any],
    *,
    title: str,
    section: str,
    status: int = 200,
    error: str | None = None,
    pending: int | None = None,
) -> HTMLResponse:
    """A full page: the template with what every page shows (navigation, the approvals count --
    ``pending`` when the page already counted them --, the live-updates URL, the CSRF field,
    notices)."""
    console, caller = console_of(request), caller_of(request)
    if pending is None:
        try:
            pending = console.pending_count(caller)
        except KorgError:
            pending = 0
    notices: list[dict[str, str]] = []
    done = request.query_params.get("done", "")
    if done in DONE:
        notices.append({"kind": "ok", "text": DONE[done]})
    if error:
        notices.append({"kind": "error", "text": error})

    who = (
        f"{caller.actor} ({caller.tenant})"
        if caller.key and caller.tenant
        else caller.actor
        if caller.key
        else ""
    )
    html = render(
        template,
        {
            **context,
            "title": title,
            "section": section,
            "page": context.get("page", section),
            "pending_count": pending,
            "events_url": "/api/v1/events",
            "csrf_name": CSRF_FIELD,
            "csrf_token": csrf_token(request.scope),
            "notices": notices,
            "who": who,
        },
    )
    return HTMLResponse(html, status_code=status)


def error_page(request: Request, exc: KorgError, *, section: str = "memories") -> HTMLResponse:
    """A refused request as a page with the CLI's message and the mapped HTTP status."""
    status = http_status(exc)
    heading = "Not found" if status == 404 else "Could not do that"
    return render_page(
        request,
        "error.html",
        {"heading": heading, "message": exc.message},
        title=heading,
        section=section,
        status=status,
    )


def see_other(path: str, done: str | None = None, anchor: str = "") -> RedirectResponse:
    """Back to ``path`` (a path this module built from checked ids) with a notice code."""
    query = f"?{urlencode({'done': done})}" if done else ""
    return RedirectResponse(f"{path}{query}{anchor}", status_code=303)


async def form_of(request: Request) -> dict[str, Any]:
    """The posted form as a dict; ``ids`` (checkboxes) as a list."""
    form = await request.form()
    data: dict[str, Any] = {name: value for name, value in form.items() if isinstance(value, str)}
    data["ids"] = [value for value in form.getlist("ids") if isinstance(value, str)]
    return data

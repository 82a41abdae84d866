"""What korg-recall shows a person at a terminal; everything else keeps getting JSON.

One answer, two forms. Scripts, agents and the bridge (whose children write to a
pipe) get the JSON they always got; a person whose stdout is a terminal gets
text -- one memory a line, tables, sentences -- unless they pass ``--json``.
The choice is made once per command, by :func:`emit`, from ``isatty``: the
bridge's envelope tools can never receive text, since their stdout is a pipe.

Whatever reaches a terminal is stored text first: a remembered sentence or a
transcript may hold ``ESC [2J`` (clear the screen), a title-bar sequence, BEL,
a carriage return that writes over what came before, or a right-to-left
override that reorders a line. :func:`guard_stdout` puts one filter on stdout
when it is a terminal, so no command -- today's or a later one -- can print
those: every control character but newline and tab is dropped, and so are the
bidirectional overrides. Prompts (on stderr) pass through :func:`clean` too.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, Any

__all__ = [
    "clean",
    "confirm",
    "emit",
    "guard_stdout",
    "is_terminal",
    "wants_text",
]

_UNSAFE = {code: None for code in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))}
"""C0 controls but tab and newline, DEL, C1 controls (U+009B is CSI where a terminal reads 8-bit codes)."""
_UNSAFE.update({code: None for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))})
"""Bidirectional embeddings, overrides and isolates: they reorder what the rest of a line says."""
_UNSAFE_CHARS = frozenset(map(chr, _UNSAFE))
WIDTH = 100
"""Columns a rendered line aims at when the terminal does not say."""


def clean(text: str) -> str:
    """``text`` without the characters a terminal would obey instead of show."""
    if not _UNSAFE_CHARS.intersection(text):
        return text
    return text.translate(_UNSAFE)


class _CleanStream:
    """A text stream that cleans every write: stdout, when it is a terminal."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(clean(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, buffer …
        return getattr(self._stream, name)


def is_terminal(stream: Any) -> bool:
    """``stream.isatty()``, False for a closed or odd stream."""
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def guard_stdout() -> None:
    """When stdout is a terminal, filter what is written to it (see the module docstring)."""
    if is_terminal(sys.stdout) and not isinstance(sys.stdout, _CleanStream):
        sys.stdout = _CleanStream(sys.stdout)


def wants_text(args: Mapping[str, Any]) -> bool:
    """Text for a person: stdout is a terminal and ``--json`` was not asked for."""
    return not args.get("json") and is_terminal(sys.stdout)


def emit(value: Any, args: Mapping[str, Any], render: Callable[[Any], str]) -> None:
    """Print a command's answer: ``render(value)`` for a person at a terminal, else its JSON."""
    if wants_text(args):
        sys.stdout.write(render(value).rstrip("\n") + "\n")
    else:
        sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def confirm(question: str) -> bool:
    """Ask a person at the terminal (stdin) a yes/no question on stderr; only y or yes is a yes.

    A closed stdin (end of file) is a no: nothing is done without an answer.
    """
    sys.stderr.write(clean(question) + " [y/N] ")
    sys.stderr.flush()
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        answer = ""
    if not answer.endswith("\n"):
        sys.stderr.write("\n")
    return answer.strip().lower() in ("y", "yes")


def _width() -> int:
    try:
        return max(40, os.get_terminal_size(sys.stdout.fileno()).columns)
    except (AttributeError, ValueError, OSError):
        return WIDTH


def _cut(text: str, room: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= room else text[: max(1, room - 1)] + "…"


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell; the last column is cut to the terminal's width."""
    cells = [[_cut(_n(cell), 200) for cell in row] for row in rows]
    widths = [max([len(header), *(len(row[i]) for row in cells)]) for i, header in enumerate(headers)]
    lead = sum(widths[:-1]) + 2 * (len(headers) - 1)
    last = max(10, _width() - lead)
    lines = []
    for row in [list(headers), *cells]:
        padded = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append("  ".join([*padded, _cut(row[-1], last)]).rstrip())
    return "\n".join(lines)


def outline(value: Any, indent: int = 0) -> str:
    """Any JSON answer as indented ``key: value`` lines: the fallback for what has no renderer."""
    pad = "  " * indent
    if isinstance(value, Mapping):
        lines = []
        for key, item in value.items():
            label = str(key).replace("_", " ")
            if isinstance(item, Mapping | list) and item:
                if isinstance(item, list) and all(not isinstance(x, Mapping | list) for x in item):
                    lines.append(f"{pad}{label}: {', '.join(_n(x) for x in item)}")
                else:
                    lines.append(f"{pad}{label}:")
                    lines.append(outline(item, indent + 1))
            else:
                shown = "none" if item in (None, [], {}) else _n(item)
                lines.append(f"{pad}{label}: {shown}")
        return "\n".join(lines)
    if isinstance(value, list):
        return "\n".join(
            f"{pad}- {outline(item, indent + 1).lstrip()}"
            if isinstance(item, Mapping)
            else f"{pad}- {_n(item)}"
            for item in value
        )
    return f"{pad}{_n(value)}"


# --- memories ----------------------------------------------------------------------------------------


def memories_text(result: Mapping[str, Any]) -> str:
    """``memories``: one memory a line (the index lines agents get), what more there is."""
    if "memories" in result:
        return "\n\n".join(_memory_text(memory) for memory in result["memories"])
    scopes = ", ".join(result.get("scopes") or [])
    total, shown = result.get("total", 0), result.get("shown", 0)
    if not total:
        return f"no memories in {scopes}." if scopes else "no memories."
    lines = [
        f"{_n(total)} memor{'y' if total == 1 else 'ies'} in {scopes}"
        + (":" if shown == total else f" ({shown} shown):")
    ]
    lines += [f"  {line}" for line in result.get("lines") or []]
    if result.get("next_cursor"):
        lines.append(f"more: korg-recall memories --cursor {result['next_cursor']}")
    if result.get("pending"):
        lines.append(f"{_n(result['pending'])} awaiting approval: korg-recall memories --pending")
    lines += [f"note: {problem}" for problem in result.get("mirror_problems") or []]
    return "\n".join(lines)


def _memory_text(memory: Mapping[str, Any]) -> str:
    flags = [
        flag for flag, on in (("pinned", memory.get("pinned")), ("conflict", memory.get("conflict"))) if on
    ]
    head = (
        f"{memory['id']} · {memory.get('type')} · {memory.get('scope')} · version {memory.get('version')} · "
        f"{memory.get('age')} · {memory.get('state')} · {memory.get('trust')}"
        + "".join(f" · {flag}" for flag in flags)
    )
    lines = [head, f"  {memory.get('title', '')}"]
    if memory.get("tags"):
        lines.append(f"  tags: {', '.join(memory['tags'])}")
    lines += [f"    {line}" for line in str(memory.get("body", "")).splitlines()]
    for version in memory.get("versions") or []:
        lines.append(
            f"  version {version.get('version')} ({version.get('state')}, {version.get('age')}): {version.get('title')}"
        )
    for link in memory.get("links") or []:
        lines.append(f"  link: {link.get('src')} {link.get('kind')} {link.get('dst')}")
    return "\n".join(lines)


def write_text(result: Mapping[str, Any]) -> str:
    """``remember``, ``revise``, ``restore``, ``memories --approve``: what happened, then the checks."""
    if "approved" in result:
        lines = [f"approved {item['id']} (version {item['version']})" for item in result["approved"]]
    else:
        version = f" version {result['version']}" if "version" in result else ""
        scope = f" in {result['scope']}" if result.get("scope") else ""
        lines = [f"{result.get('status', 'done')}: {result.get('id', '')}{version}{scope}".rstrip()]
        for similar in result.get("similar") or []:
            differs = f" (differs: {', '.join(similar['differs'])})" if similar.get("differs") else ""
            lines.append(f"  similar: {similar['id']} {similar.get('title', '')}{differs}")
    for key in ("hint", "note"):
        if result.get(key):
            lines.append(f"{key}: {result[key]}")
    checks = result.get("checks")
    if checks:
        lines.append("checks:")
        lines.append(outline(checks, 1))
    return "\n".join(lines)


_QUERY_HEADINGS = {
    "confirm": "{count} {query!r}:",
    "no_match": "no memory matches {query!r}; nothing changed.",
    "too_many": "too many memories match {query!r}; nothing changed:",
    "expired": "the confirmation expired; nothing changed. {count} {query!r}:",
    "changed": "the matches changed since; nothing changed. {count} {query!r} now:",
}
"""``forget`` by query: the first line of each answer that changed nothing."""


def forget_text(result: Mapping[str, Any]) -> str:
    """``forget``: what was retired or purged, or the matches a query found and what to do next."""
    status = result.get("status")
    if status == "cancelled":
        return "cancelled: nothing changed."
    if status in _QUERY_HEADINGS:
        matches = result.get("matches") or []
        count = f"{len(matches)} {'memory matches' if len(matches) == 1 else 'memories match'}"
        lines = [_QUERY_HEADINGS[status].format(count=count, query=result.get("query"))]
        if matches:
            rows = [[m["id"], m["type"], m["scope"], m["title"]] for m in matches]
            lines.append(table(["ID", "TYPE", "SCOPE", "TITLE"], rows))
        if result.get("note"):
            lines.append(f"note: {result['note']}")
        return "\n".join(lines)
    lines = [f"{status}: {', '.join(result.get('ids') or []) or 'nothing'}"]
    if result.get("unchanged"):
        lines.append(f"unchanged: {', '.join(result['unchanged'])}")
    for path in result.get("files_you_made") or []:
        lines.append(f"left alone (you made it): {path}")
    if result.get("note"):
        lines.append(f"note: {result['note']}")
    if result.get("checks"):
        lines += ["checks:", outline(result["checks"], 1)]
    return "\n".join(lines)


# --- the index ---------------------------------------------------------------------------------------


def index_text(report: Mapping[str, Any]) -> str:
    """``index``: what changed, in a few lines."""
    lines = [
        f"index {report.get('index')}: {_n(report.get('files_scanned', 0))} file(s) scanned, "
        f"{_n(report.get('files_changed', 0))} changed, {_n(report.get('files_gone', 0))} gone; "
        f"{_n(report.get('events_added', 0))} event(s) added, {_n(report.get('events_removed', 0))} removed "
        f"in {report.get('duration_s', 0):.1f} s"
    ]
    if report.get("skipped_lines"):
        lines.append(f"{_n(report['skipped_lines'])} line(s) skipped: `korg-recall stats` says where and why")
    for path in report.get("missing_sources") or []:
        lines.append(f"not found: {path}")
    for path in report.get("files_passed_over") or []:
        lines.append(f"passed over (not a regular file): {path}")
    embedding = report.get("embedding")
    if isinstance(embedding, Mapping):
        lines.append("embedding:")
        lines.append(outline(embedding, 1))
    return "\n".join(lines)


def _counted(title: str, groups: Mapping[str, Any]) -> list[str]:
    """A title, then one ``count  name`` line per group: counts first, so a long name is what gets cut."""
    if not groups:
        return []
    room = _width() - 12
    return [f"{title}:", *(f"  {_n(count):>8}  {_cut(name, room)}" for name, count in groups.items())]


def _inline(groups: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} {_n(count)}" for name, count in groups.items()) or "none"


def stats_text(stats: Mapping[str, Any]) -> str:
    """``stats``: the index and the memory store, summarised."""
    files = stats.get("files") or {}
    lines = [
        f"index {stats.get('index_path')} ({_n(stats.get('index_size_bytes', 0))} bytes), "
        f"last refreshed {stats.get('last_refresh') or 'never'}",
        f"{_n(stats.get('events', 0))} event(s) from {_n(files.get('indexed', 0))} file(s); "
        f"{_n(stats.get('skipped_lines', 0))} line(s) skipped, {_n(files.get('gone', 0))} file(s) gone",
    ]
    if stats.get("hint"):
        lines.append(f"hint: {stats['hint']}")
    for title, key in (
        ("events by shape", "by_shape"),
        ("events by agent", "by_agent"),
        ("events by tool or kind", "by_tool"),
        ("events by project", "by_project"),
        ("files by folder", "by_folder"),
    ):
        lines += _counted(title, stats.get(key) or {})
    for source in stats.get("sources") or []:
        if source.get("gone_since"):
            lines.append(
                f"gone since {source['gone_since']}: {source['path']} ({_n(source['events'])} events kept)"
            )
    for record in stats.get("skipped") or []:
        lines.append(f"skipped: {record['path']}:{record['line']}: {record['reason']}")
    for record in stats.get("repaired") or []:
        lines.append(f"repaired: {record['path']}:{record['line']}: {record['reason']}")
    for path in stats.get("passed_over") or []:
        lines.append(f"passed over (not a regular file): {path}")
    embedding = stats.get("embedding")
    if isinstance(embedding, Mapping) and embedding:
        lines += ["embedding:", outline(embedding, 1)]
    memory = stats.get("memory")
    if isinstance(memory, Mapping):
        lines += ["memory store:", memory_stats_text(memory, indent=1)]
    return "\n".join(lines)


_MEMORY_SHOWN = frozenset(
    ("store", "exists", "memories", "versions", "integrity_check", "by_scope", "by_type", "by_state", "untrusted",
     "pending", "conflicts", "soft_cap", "oplog", "oplog_queued", "newest_backup", "mirror", "claude")
)  # fmt: skip
"""What :func:`memory_stats_text` words itself; anything else a store describes is outlined after it."""


def memory_stats_text(stats: Mapping[str, Any], indent: int = 0) -> str:
    """``memories --stats`` (and the memory part of ``stats``)."""
    pad = "  " * indent
    if stats.get("error"):
        return f"{pad}not usable: {stats['error']}"
    if not stats.get("exists"):
        return f"{pad}none yet at {stats.get('store')}: nothing has been remembered."
    lines = [
        f"{pad}{stats.get('store')}: {_n(stats.get('memories', 0))} memories ({_n(stats.get('versions', 0))} "
        f"versions), integrity {stats.get('integrity_check', 'not run')}"
    ]
    inner = pad + "  "
    for title, key in (("by scope", "by_scope"), ("by type", "by_type"), ("by state", "by_state")):
        lines.append(f"{inner}{title}: {_inline(stats.get(key) or {})}")
    cap = stats.get("soft_cap") or {}
    lines.append(
        f"{inner}untrusted {_n(stats.get('untrusted', 0))} · pending {_n(stats.get('pending', 0))} · conflicts "
        f"{_n(stats.get('conflicts', 0))} · scopes over the soft cap ({_n(cap.get('per_scope', '-'))}): "
        f"{_inline(cap.get('over') or {})}"
    )
    if "oplog" in stats:
        lines.append(
            f"{inner}log: {stats['oplog']} ({_n(stats.get('oplog_queued', 0))} queued) · newest backup: "
            f"{stats.get('newest_backup') or 'none'}"
        )
    mirror = stats.get("mirror")
    if isinstance(mirror, Mapping):
        bad = mirror.get("unparseable") or []
        lines.append(f"{inner}mirror: {mirror.get('folder')} ({len(bad)} file(s) unreadable)")
        lines += [f"{inner}  unreadable: {path}" for path in bad]
    claude = stats.get("claude")
    if isinstance(claude, Mapping):
        files = claude.get("files") or {}
        counts = "; ".join(f"{kind}: {_inline(by)}" for kind, by in files.items()) or "none"
        lines.append(f"{inner}Claude Code files: {counts}")
        lines += [f"{inner}  skipped: {entry}" for entry in claude.get("skipped") or []]
        lines += [
            f"{inner}  folder without a project: {path}"
            for path in claude.get("folders_without_project") or []
        ]
    rest = {key: value for key, value in stats.items() if key not in _MEMORY_SHOWN}
    if rest:
        lines.append(outline(rest, indent + 1))
    return "\n".join(lines)


# --- hooks and export --------------------------------------------------------------------------------


def hooks_text(result: Mapping[str, Any]) -> str:
    """``hooks status`` as a table; ``hooks install|uninstall`` as what was done to which file."""
    if "hooks" in result:
        rows = [
            [h.get("agent"), h.get("level"), "yes" if h.get("installed") else "no", h.get("file")]
            for h in result["hooks"]
        ]
        return f"project {result.get('project')}:\n" + table(["AGENT", "LEVEL", "INSTALLED", "FILE"], rows)
    lines = [f"{result.get('status')}: {result.get('file')}"]
    rest = {k: v for k, v in result.items() if k not in ("status", "file") and v not in (None, False)}
    lines.append(outline(rest, 1))
    return "\n".join(lines)


def export_text(result: Mapping[str, Any]) -> str:
    """``export --output``: what was written where."""
    counts = {k: v for k, v in result.items() if k not in ("format", "scope", "output", "folder")}
    where = result.get("output") or result.get("folder")
    lines = [f"exported ({result.get('format')}, {result.get('scope') or 'every scope'}) to {where}"]
    if counts:
        lines.append(outline(counts, 1))
    return "\n".join(lines)

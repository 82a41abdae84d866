"""Searchable text: each event's head (what ranks first and snippets show) and body (its whole).

What the embedding model reads is tested in test_embedtext.py."""

from __future__ import annotations

from typing import Any

from korg_bridge.recall.history.ingest.event import Event
from korg_bridge.recall.history.ingest.text import (
    MAX_ARG_CHARS,
    MAX_BODY_CHARS,
    MAX_PREVIEW_CHARS,
    MAX_REPLY_CHARS,
    MAX_TEXT_CHARS,
    call_texts,
    flatten,
    result_text,
    result_texts,
    searchable,
    with_result,
)


def _event(tool: str | None, args: Any = None, result: Any = None) -> Event:
    return Event(source="/l.jsonl", offset=0, seq=1, shape="legacy", tool=tool, args=args, result=result)


def test_user_prompt_is_its_prompt_text() -> None:
    assert flatten(_event("user_prompt", {"prompt": "  Fix the bug  "})) == "Fix the bug"
    assert flatten(_event("user_prompt", {"text": "from text"})) == "from text"
    assert flatten(_event("user_prompt", "bare string")) == "bare string"


def test_llm_inference_is_its_reply_text() -> None:
    event = _event("llm_inference", {"model": "m", "prompt_tokens": 10}, {"text": "I'll run pytest.", "x": 1})
    assert flatten(event) == "I'll run pytest."
    blocks = {"content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]}
    assert flatten(_event("llm_inference", {}, blocks)) == "part one\npart two"


def test_tool_call_shows_name_telling_arguments_and_result_preview() -> None:
    event = _event(
        "Bash",
        {"command": "pytest -q", "description": "Run tests", "timeout": 120},
        {"output": "3 passed"},
    )
    assert flatten(event) == "Bash command=pytest -q description=Run tests → 3 passed"


def test_every_telling_argument_is_kept_in_a_fixed_order() -> None:
    args = {
        "url": "https://example.com",
        "file_path": "/a.py",
        "pattern": "TODO",
        "query": "rate limiter",
        "path": "src",
        "prompt": "explore",
    }
    text = flatten(_event("Tool", args))
    assert text == (
        "Tool file_path=/a.py path=src pattern=TODO query=rate limiter url=https://example.com prompt=explore"
    )


def test_tool_without_telling_arguments_falls_back_to_json() -> None:
    assert flatten(_event("Write", {"contents": "x", "mode": 1})) == 'Write {"contents": "x", "mode": 1}'


def test_result_preview_is_capped() -> None:
    text = flatten(_event("Read", {"file_path": "/big"}, {"output": "y" * 10_000}))
    preview = text.split("→ ", 1)[1]
    assert len(preview) == MAX_PREVIEW_CHARS
    assert preview.endswith("…")


def test_prompt_and_whole_text_are_capped() -> None:
    assert len(flatten(_event("user_prompt", {"prompt": "p" * 50_000}))) == MAX_REPLY_CHARS
    many = {key: "v" * 5000 for key in ("file_path", "path", "command", "pattern", "query", "url")}
    assert len(flatten(_event("Tool", many, {"output": "r" * 5000}))) <= MAX_TEXT_CHARS


def test_event_that_says_nothing_is_empty() -> None:
    assert flatten(_event("llm_inference", {"model": "m"}, {"completion_tokens": 4})) == ""
    assert flatten(_event(None)) == ""


def test_result_text_reads_strings_objects_and_blocks() -> None:
    assert result_text("plain") == "plain"
    assert result_text({"stdout": "out"}) == "out"
    assert result_text([{"type": "text", "text": "a"}, "b"]) == "a\nb"
    assert result_text({"ok": True}) == ""
    assert result_text(None) == ""
    assert result_text(42) == "42"


# --- the full text ------------------------------------------------------------------------------


def words(head: str, body: str) -> set[str]:
    """The words of a head and body as FTS5 sees them (the ellipsis of a cut is no letter)."""
    return set(f"{head} {body}".replace("…", " ").split())


def test_a_long_result_is_previewed_in_the_head_and_whole_in_the_body() -> None:
    log = (
        "\n".join(f"line {n}: ok" for n in range(1, 40)) + "\nline 40: ** (RuntimeError) no :secret_key_base"
    )
    head, body = searchable(_event("Bash", {"command": "mix test"}, {"output": log}))
    assert head.startswith("Bash command=mix test → line 1: ok") and len(head) < 400
    assert "secret_key_base" not in head
    assert body.startswith("→ ") and not body.startswith("→ line 1:")  # from the word the head cut on
    assert words(head, body) >= set(log.split())  # together they hold every word


def test_a_short_event_has_no_body() -> None:
    assert searchable(_event("Bash", {"command": "ls"}, {"output": "a b"})) == ("Bash command=ls → a b", "")
    assert searchable(_event("user_prompt", {"prompt": "hi"})) == ("hi", "")
    assert searchable(_event("Write", {"contents": "x", "mode": 1})) == (
        'Write {"contents": "x", "mode": 1}',
        "",
    )


def test_a_cut_telling_argument_is_whole_in_the_body() -> None:
    command = "python -c " + "'x' " * 200
    head, body = searchable(_event("Bash", {"command": command}))
    assert head == f"Bash command={command.strip()[: MAX_ARG_CHARS - 1]}…"
    assert body == f"command={command.strip()}"


def test_a_long_prompt_or_summary_is_whole_in_the_body() -> None:
    summary = " ".join(f"wd{n:08d}" for n in range(1500))  # 11 characters a word: the cut falls inside one
    head, body = searchable(_event("compact_summary", {"prompt": summary}))
    assert len(head) == MAX_REPLY_CHARS
    assert summary.endswith(body) and len(body) < len(summary) - MAX_REPLY_CHARS + 10
    assert words(head, body) >= set(summary.split())  # the word the head cut inside is whole in the body


def test_every_argument_reaches_the_body_not_only_the_telling_ones() -> None:
    edit = {
        "file_path": "/a.py",
        "old_string": "rate = 1",
        "new_string": "rate_limit = 10",
        "replace_all": False,
    }
    head, body = searchable(_event("Edit", edit, {"output": "updated"}))
    assert head == "Edit file_path=/a.py → updated"
    assert body == "old_string=rate = 1 new_string=rate_limit = 10"


def test_the_body_is_capped() -> None:
    _, body = searchable(_event("Read", {"file_path": "/big"}, {"output": "z" * (MAX_BODY_CHARS * 2)}))
    assert len(body) == MAX_BODY_CHARS
    assert body.endswith("…")


def test_a_result_added_later_gives_the_texts_of_the_complete_event() -> None:
    args = {"command": "pytest -q", "description": "d" * 600}
    result = {"output": "x " * 400, "stderr": "warning: slow"}
    complete = searchable(_event("Bash", args, result))
    assert with_result(*call_texts(_event("Bash", args)), *result_texts(result)) == complete
    assert complete[1].endswith("warning: slow")  # every text field of the result, stderr too


def test_titles_and_notes_are_their_own_text() -> None:
    assert (
        flatten(_event("session_title", {"title": "CSS Details Margin Styling"}))
        == "CSS Details Margin Styling"
    )
    assert flatten(_event("system_note", {"prompt": "<system-reminder>x</system-reminder>"})).startswith(
        "<system"
    )

"""Flattening: each event becomes the short text that search ranks."""

from __future__ import annotations

from typing import Any

from korg_bridge.recall.event import Event
from korg_bridge.recall.text import (
    MAX_PREVIEW_CHARS,
    MAX_REPLY_CHARS,
    MAX_TEXT_CHARS,
    embed_text,
    flatten,
    result_text,
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


def test_embedded_text_reads_a_tool_call_as_prose() -> None:
    event = _event(
        "Bash",
        {"command": "npx jest -u", "description": "Update snapshots.", "timeout": 120},
        {"output": "14 snapshots updated"},
    )
    assert embed_text(event) == "Update snapshots. npx jest -u → 14 snapshots updated"
    read = _event("Read", {"file_path": "/tmp/zoo.txt"}, "zebra stripes")
    assert embed_text(read) == "/tmp/zoo.txt → zebra stripes"


def test_embedded_text_of_prompts_replies_and_untelling_calls_is_the_searchable_text() -> None:
    for event in (
        _event("user_prompt", {"prompt": "Fix the bug"}),
        _event("llm_inference", {}, {"text": "Done."}),
        _event("TodoWrite", {"todos": [{"content": "x"}]}, {"output": "ok"}),
        _event(None),
    ):
        assert embed_text(event) == flatten(event)

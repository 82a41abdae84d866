"""What the embedding model reads of an event: prose whole (in windows), a tool call as its gist."""

from __future__ import annotations

from typing import Any

from korg_bridge.recall.history.ingest.event import Event
from korg_bridge.recall.semantic.embedtext import ERROR_LINES, PROSE_WINDOWS, embed_text, embed_windows


def _event(tool: str | None, args: Any = None, result: Any = None) -> Event:
    return Event(source="/l.jsonl", offset=0, seq=1, shape="legacy", tool=tool, args=args, result=result)


def test_a_tool_call_reads_as_its_description_command_and_result() -> None:
    event = _event(
        "Bash",
        {"command": "npx jest -u", "description": "Update snapshots.", "timeout": 120},
        {"output": "14 snapshots updated"},
    )
    assert embed_text(event) == "Update snapshots. npx jest -u → 14 snapshots updated"


def test_a_read_is_its_path_and_first_line_never_the_file() -> None:
    content = "\n".join(f"{n:>6}\tline {n} of the file" for n in range(1, 400))
    read = _event("Read", {"file_path": "/home/dev/work/app/src/zoo.py"}, content)
    assert embed_text(read) == "work/app/src/zoo.py → line 1 of the file"


def test_error_lines_from_deep_in_a_result_are_kept() -> None:
    log = "\n".join(["collecting ... 120 items"] + [f"tests/test_{n}.py PASSED" for n in range(150)])
    log += "\nFAILED tests/test_refunds.py::test_rounding - AssertionError: 9.99 != 10.00\n"
    log += "\n".join(f"tests/test_more_{n}.py PASSED" for n in range(50))
    text = embed_text(_event("Bash", {"command": "pytest -q"}, {"output": log}))
    assert text.startswith("pytest -q → collecting . 120 items FAILED tests/test_refunds.py::test_rounding")
    assert "PASSED" not in text


def test_at_most_two_error_lines_are_taken() -> None:
    log = "\n".join(f"error: problem {n}" for n in range(10))
    text = embed_text(_event("Bash", {"command": "make"}, log))
    assert text.count("error:") == ERROR_LINES + 1  # the first line is an error line too, taken once


def test_token_wasting_runs_and_home_folders_are_dropped() -> None:
    event = _event(
        "Edit",
        {
            "file_path": "/Users/ana/code/api/app.py",
            "old_string": "x",
            "new_string": "if not items:\n    return []",
        },
        "The file /Users/ana/code/api/app.py has been updated.",
    )
    assert embed_text(event) == "code/api/app.py if not items: → The file has been updated."
    banner = _event("Bash", {"command": "pytest"}, "============ 3 passed in 0.2s ============")
    assert embed_text(banner) == "pytest → = 3 passed in 0.2s ="


def test_a_call_without_telling_arguments_reads_its_string_values() -> None:
    todo = _event("TodoWrite", {"todos": [{"content": "Fix the cache", "status": "pending"}]}, "ok")
    assert embed_text(todo) == "Fix the cache; pending → ok"
    assert embed_text(_event("Mystery", {}, None)) == "Mystery"


def test_prose_is_read_whole_and_in_windows() -> None:
    long_reply = " ".join(["A sentence about the plan."] * 400)
    assert embed_text(_event("llm_inference", {}, {"text": long_reply})) == long_reply
    assert embed_text(_event("user_prompt", {"prompt": "Fix the bug"})) == "Fix the bug"
    assert embed_text(_event("compact_summary", {"prompt": "summary"})) == "summary"
    assert embed_windows("llm_inference") == embed_windows("user_prompt") == PROSE_WINDOWS
    assert embed_windows("system_note") == embed_windows("Bash") == embed_windows(None) == 1


def test_an_event_that_says_nothing_has_no_text() -> None:
    assert embed_text(_event(None)) == ""
    assert embed_text(_event("llm_inference", {}, None)) == ""

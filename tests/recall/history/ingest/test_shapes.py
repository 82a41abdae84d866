"""Shape detection and normalization of every ledger shape korg-recall reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.recall.history.ingest.event import KINDS, Event, ToolResult
from korg_bridge.recall.history.ingest.shapes import Where, detect_shape, normalize_timestamp, parse_line
from tests.helpers.paths import PEERS, REPO, peers_missing

LEDGERS = PEERS / "ledgers"
TRANSCRIPT = LEDGERS / "sessions" / "claude-code-transcript.jsonl"
STREAM = LEDGERS / "sessions" / "claude-stream-json-subagents.jsonl"
ENVELOPE = LEDGERS / "sessions" / "korg-envelope-session.jsonl"
JOURNAL = LEDGERS / "korg-ledger-v1" / "basic-intact.jsonl"
STREAM_SESSION = "c32a3441-1f15-490b-90ab-c57d87493472"
AGENT_TOOL_USE = "toolu_01AEH9PVa1hPDANZDHPwsnZs"

needs_peers = pytest.mark.skipif(not LEDGERS.is_dir(), reason=peers_missing(LEDGERS))


def normalize(
    obj: dict[str, Any], *, source: str, offset: int, line_no: int, state: dict[str, Any] | None = None
) -> list[Event | ToolResult]:
    return parse_line(obj, Where(source, offset, line_no), {} if state is None else state)


def _normalize_file(path: Path) -> list[tuple[dict[str, Any], list[Event | ToolResult]]]:
    """Parse each line of ``path`` and normalize it, tracking offsets and state the way the reader does."""
    out = []
    offset = 0
    source = str(path.resolve())
    state: dict[str, Any] = {}
    for line_no, raw in enumerate(path.read_bytes().splitlines(keepends=True), start=1):
        obj = json.loads(raw)
        out.append((obj, normalize(obj, source=source, offset=offset, line_no=line_no, state=state)))
        offset += len(raw)
    return out


def _events(path: Path) -> list[Event]:
    return [item for _, items in _normalize_file(path) for item in items if isinstance(item, Event)]


def _patches(path: Path) -> list[ToolResult]:
    return [item for _, items in _normalize_file(path) for item in items if isinstance(item, ToolResult)]


# --- detection ------------------------------------------------------------------------------------


@needs_peers
@pytest.mark.parametrize(
    ("path", "shape"),
    [(JOURNAL, "journal"), (ENVELOPE, "envelope"), (TRANSCRIPT, "claude-code"), (STREAM, "claude-code")],
    ids=["journal", "envelope", "transcript", "stream-json"],
)
def test_every_line_of_a_peer_file_is_detected_as_its_shape(path: Path, shape: str) -> None:
    assert {detect_shape(obj) for obj, _ in _normalize_file(path)} == {shape}


def test_legacy_record_is_detected_by_seq_and_tool_name() -> None:
    assert detect_shape({"seq": 3, "source_agent": "a", "tool_name": "Bash"}) == "legacy"


@pytest.mark.parametrize(
    "obj",
    [{}, {"foo": 1}, {"type": "summary"}, {"seq": True, "tool_name": "x"}, {"seq_id": "1"}, {"seq": 1}],
)
def test_records_that_are_no_event_line_are_not_detected(obj: dict[str, Any]) -> None:
    assert detect_shape(obj) is None
    assert normalize(obj, source="/x.jsonl", offset=0, line_no=1) == []


# --- ledger shapes --------------------------------------------------------------------------------


@needs_peers
def test_envelope_events_carry_their_real_seq_ids_not_zero() -> None:
    events = _events(ENVELOPE)
    assert [e.seq for e in events] == [1, 2, 3, 4, 5, 6]
    assert [e.tool for e in events] == [
        "user_prompt",
        "llm_inference",
        "Read",
        "Edit",
        "Bash",
        "llm_inference",
    ]
    assert [e.triggered_by for e in events] == [None, 1, 2, 2, 2, 2]
    assert {e.agent for e in events} == {"agent:claude-code@2.1.0"}
    assert {e.shape for e in events} == {"envelope"}
    assert {e.session for e in events} == {"korg-envelope-session"}


@needs_peers
def test_envelope_event_keeps_fields_from_under_event_and_metadata() -> None:
    edit = _events(ENVELOPE)[3]
    assert edit.args == {
        "file_path": "math_utils.py",
        "old_string": "return a + b",
        "new_string": "return a - b",
    }
    assert edit.result == {"status": "updated"}
    assert edit.success is True
    assert edit.timestamp == "2026-06-14T02:55:28.592100Z"
    assert edit.extra == {
        "event_type": "AgentToolCall",
        "duration_ms": 81,
        "event_id": "158d9ae8-b7aa-434a-9061-a414965a1d4a",
    }


@needs_peers
def test_envelope_event_offsets_point_at_the_start_of_their_line() -> None:
    data = ENVELOPE.read_bytes()
    for event in _events(ENVELOPE):
        line = data[event.offset :].split(b"\n", 1)[0]
        assert json.loads(line)["seq_id"] == event.seq


@needs_peers
def test_flat_journal_records_normalize_from_the_conformance_vector() -> None:
    events = _events(JOURNAL)
    assert [(e.seq, e.tool, e.triggered_by) for e in events] == [
        (1, "user_prompt", None),
        (2, "llm_inference", 1),
        (3, "Write", 2),
    ]
    assert {e.shape for e in events} == {"journal"}
    assert {e.agent for e in events} == {"agent:conformance"}
    assert {e.session for e in events} == {"basic-intact"}
    assert events[0].args == {"prompt": "add a function"}
    assert events[2].result == {"ok": True}
    assert events[1].extra == {"duration_ms": 12}
    assert all(e.timestamp is None for e in events)


def test_legacy_record_normalizes_with_its_seq_and_cause() -> None:
    obj = {
        "seq": 7,
        "source_agent": "agent:korgex@0.2.2",
        "tool_name": "Bash",
        "args": {"command": "ls"},
        "result": {"output": "a"},
        "success": False,
        "triggered_by": 5,
        "timestamp": "2026-01-02T03:04:05+02:00",
    }
    [event] = normalize(obj, source="/home/u/.korg/sessions/s-42.jsonl", offset=120, line_no=9)
    assert event == Event(
        source="/home/u/.korg/sessions/s-42.jsonl",
        offset=120,
        seq=7,
        shape="legacy",
        session="s-42",
        agent="agent:korgex@0.2.2",
        tool="Bash",
        args={"command": "ls"},
        result={"output": "a"},
        success=False,
        timestamp="2026-01-02T01:04:05Z",
        triggered_by=5,
        extra={},
    )


def test_record_session_id_wins_over_the_file_stem() -> None:
    obj = {"seq_id": 1, "session_id": "campaign-run-9", "tool_name": "t"}
    [event] = normalize(obj, source="/l/ledger.jsonl", offset=0, line_no=1)
    assert isinstance(event, Event)
    assert event.session == "campaign-run-9"


def test_fields_of_the_wrong_type_are_dropped_not_raised() -> None:
    obj = {"seq_id": 1, "source_agent": 5, "tool_name": [], "success": "yes", "triggered_by": "1"}
    [event] = normalize(obj, source="/l.jsonl", offset=0, line_no=1)
    assert isinstance(event, Event)
    assert (event.agent, event.tool, event.success, event.triggered_by) == (None, None, None, None)


# --- Claude Code ----------------------------------------------------------------------------------


@needs_peers
def test_transcript_yields_prompts_inference_and_tool_calls_with_line_seqs() -> None:
    events = _events(TRANSCRIPT)
    assert [(e.seq, e.extra["part"], e.tool) for e in events] == [
        (4, 0, "user_prompt"),
        (5, 0, "llm_inference"),
        (5, 1, "Read"),
        (7, 0, "llm_inference"),
        (8, 0, "user_prompt"),
        (9, 0, "Bash"),
        (11, 0, "llm_inference"),
    ]
    assert {e.agent for e in events} == {"claude-code#sess-1"}
    assert {e.session for e in events} == {"sess-1"}
    assert events[0].args == {"prompt": "read /tmp/foo and tell me what's in it"}
    assert events[0].timestamp == "2026-05-27T10:00:00Z"
    assert events[1].args == {"model": "claude-opus-4-7"}
    assert events[1].result == {"text": "Let me check that file."}
    assert events[2].args == {"file_path": "/tmp/foo"}
    assert events[2].extra == {"tool_use_id": "toolu_01", "part": 1}
    assert events[5].args == {"command": "ls /tmp", "description": "List /tmp"}


@needs_peers
def test_transcript_tool_results_become_patches_paired_by_tool_use_id() -> None:
    events = {e.extra.get("tool_use_id"): e for e in _events(TRANSCRIPT)}
    patches = _patches(TRANSCRIPT)
    assert [(p.tool_use_id, p.result, p.success, p.timestamp) for p in patches] == [
        ("toolu_01", {"output": "hello world"}, True, "2026-05-27T10:00:02Z"),
        ("toolu_02", {"output": "foo\nbar\nbaz"}, True, "2026-05-27T10:00:06Z"),
    ]
    assert events["toolu_01"].tool == "Read"
    assert events["toolu_02"].tool == "Bash"


@needs_peers
def test_transcript_bookkeeping_lines_produce_no_events() -> None:
    quiet = [obj["type"] for obj, items in _normalize_file(TRANSCRIPT) if not items]
    assert quiet == ["last-prompt", "permission-mode", "system", "attachment", "ai-title"]


def test_tool_result_with_is_error_marks_failure_and_flattens_blocks() -> None:
    obj = {
        "type": "user",
        "sessionId": "s",
        "message": {
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_9",
                    "is_error": True,
                    "content": [
                        {"type": "text", "text": "boom"},
                        {"type": "image"},
                        {"type": "text", "text": "!"},
                    ],
                }
            ]
        },
    }
    [patch] = normalize(obj, source="/t.jsonl", offset=0, line_no=1)
    assert patch == ToolResult(
        tool_use_id="toolu_9",
        result={"output": "boom\n[image]\n!"},
        success=False,
        timestamp=None,
    )


def test_user_message_with_text_blocks_and_a_result_yields_both() -> None:
    obj = {
        "type": "user",
        "sessionId": "abcdefghijkl",
        "isSidechain": True,
        "message": {
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": None},
                {"type": "text", "text": "[Request interrupted by user]"},
            ]
        },
    }
    patch, marker = normalize(obj, source="/t.jsonl", offset=0, line_no=3)
    assert isinstance(patch, ToolResult)
    assert patch.result == {"output": ""}
    assert isinstance(marker, Event)
    assert marker.tool == "interrupt"
    assert marker.agent == "claude-code#abcdefgh"
    assert marker.extra == {"sidechain": True, "part": 0}


@needs_peers
def test_stream_json_tags_sub_agent_lines_as_sidechain_with_their_parent() -> None:
    events = _events(STREAM)
    assert [(e.seq, e.tool) for e in events] == [
        (5, "Agent"),
        (7, "subagent_prompt"),
        (10, "Bash"),
        (14, "llm_inference"),
    ]
    agent_call, sub_prompt, sub_bash, answer = events
    assert agent_call.extra == {"tool_use_id": AGENT_TOOL_USE, "part": 0}
    assert sub_prompt.extra == {"sidechain": True, "parent_tool_use_id": AGENT_TOOL_USE, "part": 0}
    assert sub_bash.extra["sidechain"] is True
    assert sub_bash.extra["parent_tool_use_id"] == AGENT_TOOL_USE
    assert sub_bash.args == {
        "command": 'find /Users/clubpenguin/Documents/Korg/crates -name "*.rs" -type f | wc -l'
    }
    assert "sidechain" not in answer.extra
    assert answer.result == {"text": "51"}
    assert {e.session for e in events} == {STREAM_SESSION}
    assert {e.agent for e in events} == {"claude-code#c32a3441"}
    assert sub_prompt.timestamp == "2026-05-25T20:56:14.006000Z"
    assert agent_call.timestamp is None  # stream-json assistant lines carry none


@needs_peers
def test_stream_json_results_pair_with_the_sub_agent_and_its_inner_call() -> None:
    assert [(p.tool_use_id, p.result, p.success) for p in _patches(STREAM)] == [
        ("toolu_0132PR9F5MR3AP9eZGcBYi5f", {"output": "      51"}, True),
        (AGENT_TOOL_USE, {"output": "51"}, True),
    ]


@needs_peers
def test_stream_json_thinking_system_and_result_lines_produce_nothing() -> None:
    quiet = [
        (line_no, obj["type"]) for line_no, (obj, items) in enumerate(_normalize_file(STREAM), 1) if not items
    ]
    assert quiet == [
        (1, "system"),
        (2, "system"),
        (3, "system"),
        (4, "assistant"),  # a thinking block only
        (6, "system"),
        (8, "rate_limit_event"),
        (9, "system"),
        (12, "system"),
        (15, "result"),
    ]


# --- timestamps -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-05-27T10:00:00.000Z", "2026-05-27T10:00:00Z"),
        ("2026-06-14T02:55:28.591515Z", "2026-06-14T02:55:28.591515Z"),
        ("2026-01-02T03:04:05+02:00", "2026-01-02T01:04:05Z"),
        ("2026-01-02T03:04:05", "2026-01-02T03:04:05Z"),
        ("2026-01-02T03:04:05.123456789Z", "2026-01-02T03:04:05.123456Z"),
        (1781405728, "2026-06-14T02:55:28Z"),
        (1781405728591, "2026-06-14T02:55:28.591000Z"),
        ("yesterday-ish", "yesterday-ish"),
        (None, None),
        (True, None),
        ({"physical": 1}, None),
    ],
)
def test_timestamps_normalize_to_utc_z_or_stay_as_found(raw: Any, expected: str | None) -> None:
    assert normalize_timestamp(raw) == expected


# --- honest labels -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "kind"),
    [
        ("fix the login bug", {}, "user_prompt"),
        ("<command-name>/clear</command-name>\n<command-message>clear</command-message>", {}, "command"),
        ("<command-message>model</command-message>\n<command-name>/model</command-name>", {}, "command"),
        ("<local-command-stdout>See ya!</local-command-stdout>", {}, "command_output"),
        ("<local-command-caveat>Caveat: …</local-command-caveat>", {"isMeta": True}, "command_output"),
        ("<bash-input>uv run pytest</bash-input>", {}, "shell"),
        ("<bash-stdout>5 passed</bash-stdout><bash-stderr></bash-stderr>", {}, "shell"),
        ("<ide_opened_file>The user opened a.py</ide_opened_file>", {}, "ide_context"),
        ("<ide_selection>lines 3 to 4</ide_selection>", {}, "ide_context"),
        ("[Request interrupted by user for tool use]", {}, "interrupt"),
        ("<task-notification>\n<task-id>b6</task-id>", {}, "task_notification"),
        ("<system-reminder>\nhook context</system-reminder>", {"isMeta": True}, "system_note"),
        ("Caveat: The messages below were generated by the user", {"isMeta": True}, "system_note"),
        (
            "This session is being continued from a previous conversation",
            {"isCompactSummary": True},
            "compact_summary",
        ),
        ("Warmup", {"isSidechain": True}, "subagent_prompt"),
        ("  <b>bold</b> is what I typed", {}, "user_prompt"),
    ],
)
def test_each_text_block_of_a_user_line_is_labelled_by_who_wrote_it(
    text: str, line: dict[str, Any], kind: str
) -> None:
    obj = {"type": "user", "sessionId": "s", "message": {"role": "user", "content": text}, **line}
    [event] = normalize(obj, source="/t.jsonl", offset=0, line_no=1)
    assert isinstance(event, Event)
    assert event.tool == kind


def test_an_ide_block_and_a_typed_block_of_one_message_get_their_own_kinds() -> None:
    content = [
        {"type": "text", "text": "<ide_opened_file>The user opened x.mdx</ide_opened_file>"},
        {"type": "image", "source": {"data": "AAAA"}},
        {"type": "text", "text": "why do angle brackets break the build?"},
    ]
    obj = {"type": "user", "sessionId": "s", "cwd": "/w", "message": {"role": "user", "content": content}}
    events = normalize(obj, source="/t.jsonl", offset=0, line_no=1)
    assert [(e.tool, e.extra["part"]) for e in events if isinstance(e, Event)] == [
        ("ide_context", 0),
        ("user_prompt", 1),
    ]


def test_summary_lines_are_session_titles_of_the_file() -> None:
    obj = {"type": "summary", "summary": "CSS Details Margin Styling", "leafUuid": "f29f"}
    [title] = normalize(obj, source="/p/proj/3680252d-aaaa.jsonl", offset=0, line_no=1)
    assert isinstance(title, Event)
    assert (title.tool, title.args, title.session) == (
        "session_title",
        {"title": "CSS Details Margin Styling"},
        "3680252d-aaaa",
    )
    assert title.extra == {"leaf_uuid": "f29f", "part": 0}


def test_a_sub_agent_line_without_a_session_takes_it_from_its_folder() -> None:
    obj = {
        "type": "user",
        "isSidechain": True,
        "agentId": "aef0",
        "cwd": "/w/app",
        "gitBranch": "main",
        "message": {"role": "user", "content": "You are bob."},
    }
    [event] = normalize(obj, source="/p/proj/ef958aa1/subagents/agent-aef0.jsonl", offset=0, line_no=1)
    assert isinstance(event, Event)
    assert (event.tool, event.session, event.agent, event.cwd) == (
        "subagent_prompt",
        "ef958aa1",
        "claude-code#ef958aa1",
        "/w/app",
    )
    assert event.extra == {"sidechain": True, "agent_id": "aef0", "git_branch": "main", "part": 0}


def test_a_line_without_cwd_keeps_the_one_named_before() -> None:
    state: dict[str, Any] = {}
    normalize(
        {"type": "system", "subtype": "init", "cwd": "/w/app", "session_id": "s"},
        source="/t",
        offset=0,
        line_no=1,
        state=state,
    )
    [event] = normalize(
        {"type": "user", "session_id": "s", "message": {"content": "go"}},
        source="/t",
        offset=9,
        line_no=2,
        state=state,
    )
    assert isinstance(event, Event)
    assert event.cwd == "/w/app"


# --- Codex rollouts ----------------------------------------------------------------------------------

ROLLOUT = (
    "/h/.codex/sessions/2026/05/11/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
)


def codex(
    kind: str, payload: dict[str, Any], state: dict[str, Any] | None = None
) -> list[Event | ToolResult]:
    obj = {"timestamp": "2026-05-11T08:27:00.123Z", "type": kind, "payload": payload}
    assert detect_shape(obj) == "codex"
    return normalize(obj, source=ROLLOUT, offset=0, line_no=5, state={} if state is None else state)


def test_codex_session_meta_names_the_session_cwd_and_branch_for_later_lines() -> None:
    state: dict[str, Any] = {}
    meta = {"id": "019e1625-789d-76c0-80ab-3724b5ddb799", "cwd": "/repo", "git": {"branch": "feat/x"}}
    assert codex("session_meta", meta, state) == []
    codex("turn_context", {"cwd": "/repo/sub", "model": "gpt-5.5"}, state)
    [typed] = codex("event_msg", {"type": "user_message", "message": "show tools", "images": []}, state)
    assert isinstance(typed, Event)
    assert (typed.tool, typed.args, typed.agent, typed.cwd) == (
        "user_prompt",
        {"prompt": "show tools"},
        "codex#019e1625",
        "/repo/sub",
    )
    assert typed.extra == {"git_branch": "feat/x"}
    assert typed.timestamp == "2026-05-11T08:27:00.123000Z"
    [reply] = codex(
        "response_item",
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
        state,
    )
    assert isinstance(reply, Event)
    assert (reply.tool, reply.args, reply.result) == (
        "llm_inference",
        {"model": "gpt-5.5"},
        {"text": "Done."},
    )


def test_codex_without_session_meta_takes_the_session_from_the_file_name() -> None:
    [typed] = codex("event_msg", {"type": "user_message", "message": "hi"})
    assert isinstance(typed, Event)
    assert typed.session == "019e1625-789d-76c0-80ab-3724b5ddb799"


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("event_msg", {"type": "agent_message", "message": "Done."}),
        (
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "show tools"}]},
        ),
        (
            "response_item",
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "<permissions>"}],
            },
        ),
        ("response_item", {"type": "reasoning", "encrypted_content": "gAAA"}),
        ("event_msg", {"type": "token_count", "info": None}),
        ("event_msg", {"type": "exec_command_end", "call_id": "c", "exit_code": 0}),
    ],
    ids=["agent-message-echo", "user-message-echo", "developer", "reasoning", "token-count", "exec-end"],
)
def test_codex_echoes_instructions_and_bookkeeping_hold_no_event(kind: str, payload: dict[str, Any]) -> None:
    assert codex(kind, payload) == []


def test_codex_injected_context_is_a_system_note_not_a_prompt() -> None:
    content = [
        {"type": "input_text", "text": "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>…"},
        {"type": "input_text", "text": "<environment_context>\n  <cwd>/repo</cwd>"},
    ]
    [note] = codex("response_item", {"type": "message", "role": "user", "content": content})
    assert isinstance(note, Event)
    assert note.tool == "system_note"


def test_codex_calls_parse_their_arguments_and_outputs_say_whether_they_succeeded() -> None:
    arguments = json.dumps({"cmd": "npm test", "workdir": "/repo"})
    [call] = codex(
        "response_item",
        {"type": "function_call", "name": "exec_command", "arguments": arguments, "call_id": "call_1"},
    )
    assert isinstance(call, Event)
    assert (call.tool, call.args, call.extra["tool_use_id"]) == (
        "exec_command",
        {"cmd": "npm test", "workdir": "/repo"},
        "call_1",
    )
    output = "Chunk ID: 1\nWall time: 1.0 seconds\nProcess exited with code 1\nOutput:\nFAIL a.test.ts"
    [failed] = codex("response_item", {"type": "function_call_output", "call_id": "call_1", "output": output})
    assert failed == ToolResult("call_1", {"output": output}, False, "2026-05-11T08:27:00.123000Z")
    patch_output = json.dumps({"output": "Success. Updated a.ts\n", "metadata": {"exit_code": 0}})
    [applied] = codex(
        "response_item", {"type": "custom_tool_call_output", "call_id": "call_2", "output": patch_output}
    )
    assert isinstance(applied, ToolResult)
    assert (applied.result, applied.success) == ({"output": "Success. Updated a.ts\n"}, True)
    [running] = codex(
        "response_item",
        {"type": "function_call_output", "call_id": "c3", "output": "Process running with session ID 4"},
    )
    assert isinstance(running, ToolResult)
    assert running.success is None


def test_codex_patches_searches_and_compactions_are_events() -> None:
    [patch] = codex(
        "response_item",
        {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c"},
    )
    assert isinstance(patch, Event)
    assert (patch.tool, patch.args) == ("apply_patch", {"input": "*** Begin Patch"})
    action = {"type": "search", "query": "opencode compaction"}
    [searched] = codex("response_item", {"type": "web_search_call", "status": "completed", "action": action})
    assert isinstance(searched, Event)
    assert (searched.tool, searched.args, searched.success) == ("web_search", action, True)
    [summary] = codex("compacted", {"message": "Summary of the work so far"})
    assert isinstance(summary, Event)
    assert summary.tool == "compact_summary"


def test_every_event_kind_is_documented_in_the_recall_docs() -> None:
    readme = (REPO / "docs" / "recall.md").read_text(encoding="utf-8")
    for kind in KINDS:
        assert f"| `{kind}` |" in readme, kind

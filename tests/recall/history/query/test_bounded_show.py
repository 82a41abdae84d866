"""``show`` answers stay bounded on real transcripts, and every cut names the call that reads on.

A real ``Read`` of a 40 KB file, shown with context, once came to 137 KB on the command line.
Now each string longer than ``limit`` is windowed at ``offset``, the whole answer stays under
:data:`~korg_bridge.recall.history.query.paging.RESPONSE_CHARS`, and following ``next`` gives back everything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.recall.cli.app import main
from korg_bridge.recall.history.query.paging import DEFAULT_LIMIT, MIN_LIMIT, RESPONSE_CHARS, bound_events
from tests.helpers.paths import peers_missing
from tests.helpers.sqlite import connect
from tests.helpers.transcripts import TRANSCRIPTS, unpack_transcripts

Show = Callable[..., dict[str, Any]]

SLACK = 200
"""Characters the printed answer may exceed the cap by: the measure counts the events' nesting."""


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    folder = unpack_transcripts(tmp_path_factory.mktemp("transcripts"))
    if folder is None:
        pytest.skip(peers_missing(TRANSCRIPTS))
    yield folder, tmp_path_factory.mktemp("index") / "index.sqlite"


@pytest.fixture
def show(
    history: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Show:
    folder, index = history
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    monkeypatch.setenv("KORG_RECALL_LEDGER", str(folder))
    monkeypatch.setenv("KORG_RECALL_INDEX", str(index))
    assert main(["index"]) == 0
    capsys.readouterr()

    def call(*argv: str) -> dict[str, Any]:
        code = main(["show", *argv])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert len(out) <= RESPONSE_CHARS + SLACK or "--full" in argv
        answer: dict[str, Any] = json.loads(out)
        return answer

    return call


def _biggest(index: Path, count: int = 1) -> list[str]:
    rows = connect(index).execute("SELECT id FROM events ORDER BY length(result) DESC LIMIT ?", (count,))
    return [f"e{row[0]}" for row in rows]


def _follow(show: Show, first: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Every string each event showed, across ``first`` and all the calls its ``next`` names."""
    pieces: dict[str, dict[str, list[tuple[int, str]]]] = {}
    pending = [first]
    calls = 0
    while pending:
        answer = pending.pop(0)
        for event in answer["events"]:
            windows = {cut["field"]: cut for cut in event.get("truncated", [])}
            for field, text in _strings(event):
                start = windows[field]["shown"][0] if field in windows else 0
                pieces.setdefault(event["ref"], {}).setdefault(field, []).append((start, text))
        for call in answer.get("next", []):
            calls += 1
            assert calls < 200, "paging does not end"
            refs = ",".join(call["ref"])
            pending.append(show(refs, "--offset", str(call["offset"]), "--limit", str(call["limit"])))
    whole: dict[str, dict[str, str]] = {}
    for ref, fields in pieces.items():
        for field, parts in fields.items():
            text = ""
            for start, part in sorted(parts):
                text = text[:start] + part if start <= len(text) else text
            whole.setdefault(ref, {})[field] = text
    return whole


def _strings(value: Any, where: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, sub in value.items():
            if key not in ("truncated", "as_json_text"):
                yield from _strings(sub, f"{where}.{key}" if where else key)
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from _strings(sub, f"{where}[{i}]")


def test_a_big_real_event_is_cut_with_a_notice_naming_the_next_call(
    show: Show, history: tuple[Path, Path]
) -> None:
    [ref] = _biggest(history[1])
    full = show(ref, "--full")["events"][0]
    assert len(full["result"]["output"]) > 4 * DEFAULT_LIMIT  # a real big Read
    answer = show(ref)
    [event] = answer["events"]
    assert event["truncated"] == [
        {"field": "result.output", "length": len(full["result"]["output"]), "shown": [0, DEFAULT_LIMIT]}
    ]
    assert event["result"]["output"] == full["result"]["output"][:DEFAULT_LIMIT]
    assert event["args"] == full["args"]  # short values are whole
    assert answer["next"] == [{"ref": [ref], "offset": DEFAULT_LIMIT, "limit": DEFAULT_LIMIT}]
    assert (
        f'call show with {{"ref": ["{ref}"], "offset": {DEFAULT_LIMIT}, "limit": {DEFAULT_LIMIT}}}'
        in (answer["notice"])
    )


def test_following_next_reads_a_big_event_to_its_end(show: Show, history: tuple[Path, Path]) -> None:
    [ref] = _biggest(history[1])
    full = show(ref, "--full")["events"][0]
    assert _follow(show, show(ref))[ref]["result.output"] == full["result"]["output"]


def test_context_around_big_events_stays_under_the_cap_and_pages_to_everything(
    show: Show, history: tuple[Path, Path]
) -> None:
    refs = _biggest(history[1], 3)
    full = {event["ref"]: event for event in show(",".join(refs), "--context", "2", "--full")["events"]}
    assert sum(len(json.dumps(event)) for event in full.values()) > 2 * RESPONSE_CHARS
    first = show(",".join(refs), "--context", "2")
    assert first["next"]
    whole = _follow(show, first)
    assert set(whole) == set(full)
    for ref, event in full.items():
        assert whole[ref] == dict(_strings(event)), ref


def test_past_the_end_of_a_string_nothing_more_is_offered(show: Show, history: tuple[Path, Path]) -> None:
    [ref] = _biggest(history[1])
    answer = show(ref, "--offset", "10000000")
    [cut] = answer["events"][0]["truncated"]
    assert cut["shown"] == [cut["length"], cut["length"]]
    assert "next" not in answer


# --- the paging rules on made-up events ---------------------------------------------------------------


def _event(ref: str, **fields: Any) -> dict[str, Any]:
    return {"ref": ref, "args": {}, "result": {}, "text": "", **fields}


def test_a_first_event_too_big_for_the_cap_is_narrowed_until_it_fits() -> None:
    events = [_event("e1", args={"a": "x" * 30_000, "b": "y" * 30_000}), _event("e2", text="z" * 35_000)]
    answer = bound_events(events, limit=30_000, budget=40_000)
    [shown] = answer["events"]
    width = shown["truncated"][0]["shown"][1]
    assert MIN_LIMIT <= width < 20_000
    assert answer["next"] == [
        {"ref": ["e2"], "offset": 0, "limit": 30_000},
        {"ref": ["e1"], "offset": width, "limit": width},
    ]


def test_an_event_of_many_short_values_is_shown_as_json_text_and_pages_the_same_way() -> None:
    bulky = _event("e1", result={"rows": [f"row {i:05d}" for i in range(10_000)]})
    first = bound_events([bulky])
    [shown] = first["events"]
    assert shown["as_json_text"] == ["result"]
    assert shown["args"] == {}
    assert shown["result"] == json.dumps(bulky["result"])[:DEFAULT_LIMIT]
    [call] = first["next"]
    second = bound_events([bulky], offset=call["offset"], limit=call["limit"])
    assert second["events"][0]["result"] == json.dumps(bulky["result"])[DEFAULT_LIMIT : 2 * DEFAULT_LIMIT]


def test_full_turns_every_cut_off() -> None:
    events = [_event(f"e{i}", text="z" * 50_000) for i in range(3)]
    assert bound_events(events, full=True) == {"events": events}

"""LineProgress: bounded rate, strictly increasing progress, bounded memory, no delay at close."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from korg_bridge.bridge.progress import MAX_MESSAGE, LineProgress, readable
from tests.helpers.bridge_client import open_bridge, text_of
from tests.helpers.cli import recall_script

pytestmark = pytest.mark.anyio


async def test_lines_are_coalesced_and_progress_increases() -> None:
    sent: list[tuple[float, str]] = []

    async def report(value: float, message: str) -> None:
        sent.append((value, message))

    progress = LineProgress(report, max_rate=10)
    async with anyio.create_task_group() as tg:
        tg.start_soon(progress.run)
        for i in range(1, 201):
            await progress.feed(f"line {i}\n".encode())
            if i % 20 == 0:
                await anyio.sleep(0.02)
        progress.close()
    values = [v for v, _ in sent]
    assert values == sorted(set(values))
    assert len(sent) <= 10 * 0.4 + 2  # ~0.2 s of feeding at 10/s
    assert sent[0][0] >= 1.0 and sent[0][1] == f"line {int(sent[0][0])}"


async def test_partial_lines_wait_and_long_lines_are_truncated() -> None:
    sent: list[tuple[float, str]] = []

    async def report(value: float, message: str) -> None:
        sent.append((value, message))

    progress = LineProgress(report)
    async with anyio.create_task_group() as tg:
        tg.start_soon(progress.run)
        await progress.feed(b"half")
        await anyio.sleep(0.06)
        assert sent == []
        await progress.feed(b" done\n" + b"x" * 1000 + b"\n")
        await anyio.sleep(0.06)
        progress.close()
    assert sent[0] == (1.0, "half done") or sent[0][1].startswith("x")
    assert all(len(m) <= MAX_MESSAGE for _, m in sent)


async def test_close_does_not_wait_for_the_rate_limit() -> None:
    async def report(value: float, message: str) -> None:
        pass

    progress = LineProgress(report, max_rate=1)  # one a second
    with anyio.fail_after(0.5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(progress.run)
            await progress.feed(b"a\n")
            await anyio.sleep(0.01)
            await progress.feed(b"b\n")
            progress.close()


async def test_a_failing_report_never_fails_the_call() -> None:
    async def report(value: float, message: str) -> None:
        raise RuntimeError("client went away")

    progress = LineProgress(report)
    async with anyio.create_task_group() as tg:
        tg.start_soon(progress.run)
        await progress.feed(b"a\n")
        await anyio.sleep(0.01)
        progress.close()
    assert progress.sent == 0


async def test_an_indented_json_document_is_reported_by_its_size_not_by_a_brace() -> None:
    sent: list[tuple[float, str]] = []

    async def report(value: float, message: str) -> None:
        sent.append((value, message))

    progress = LineProgress(report)
    async with anyio.create_task_group() as tg:
        tg.start_soon(progress.run)
        await progress.feed(b'{\n  "index": "/x",\n  "files_scanned": 3,\n  "embedding": {}\n}\n')
        await anyio.sleep(0.1)
        progress.close()
    assert sent == [(5.0, "5 lines of output so far")]


async def test_the_message_is_the_latest_line_that_reads_as_a_status() -> None:
    sent: list[tuple[float, str]] = []

    async def report(value: float, message: str) -> None:
        sent.append((value, message))

    progress = LineProgress(report)
    async with anyio.create_task_group() as tg:
        tg.start_soon(progress.run)
        await progress.feed(b"  embedded 200 of 900 events  \n\n  },\n")
        await anyio.sleep(0.1)
        progress.close()
    assert sent == [(3.0, "embedded 200 of 900 events")]


@pytest.mark.parametrize(
    ("line", "expected"),
    [("}", False), ("],", False), ('"files": 3,', False), ("", False), ("...", False), ("tick 3", True)],
)
def test_what_reads_as_a_status(line: str, expected: bool) -> None:
    assert readable(line) is expected


async def test_korg_recall_s_long_running_index_reports_readable_progress_through_mcp(tmp_path: Path) -> None:
    """The real thing: ``korg-bridge korg-recall``, a client asking for progress, ``index``."""
    korg_recall = str(recall_script())
    ledger = tmp_path / "s.jsonl"
    ledger.write_text(json.dumps({"seq": 1, "tool_name": "Bash", "args": {"command": "ls"}}) + "\n")
    messages: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    env = {
        "HOME": str(tmp_path),
        "KORG_RECALL_INDEX": str(tmp_path / "index.sqlite"),
        "KORG_RECALL_BACKGROUND": "0",
    }
    async with open_bridge(korg_recall, env=env, cwd=tmp_path) as running:
        with anyio.fail_after(60):
            result = await running.client.call_tool(
                "korg-recall_index",
                {"ledger": [str(ledger)], "no_embed": True},
                progress_callback=on_progress,
            )
    assert not result.is_error and json.loads(text_of(result))["events_added"] == 1
    assert all(message is not None and readable(message) for message in messages), messages

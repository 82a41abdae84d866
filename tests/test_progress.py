"""LineProgress: bounded rate, strictly increasing progress, bounded memory, no delay at close."""

from __future__ import annotations

import anyio
import pytest

from korg_bridge.progress import MAX_MESSAGE, LineProgress

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

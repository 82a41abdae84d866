"""The pictures in ``docs/console.md``: every console page in the light and the dark theme, taken
by Debian's chromium from a demo store this script builds in a temporary folder.

    python -m tests.recall.console.screenshots [--out docs/console]

Run from the repository root with the test extra installed (Playwright) and ``/usr/bin/chromium``.
The demo's memories and history are written the way agents write them (:mod:`.demo`); nothing
outside the temporary folder is read or written, except the PNGs in ``--out``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from tests.recall.console.demo import SESSION, build_demo

PAGES: tuple[tuple[str, str], ...] = (
    ("memories", "/memories"),
    ("search", "/memories?q=refund+database&mode=keyword"),
    ("memory", "/memories/{refunds}"),
    ("remember-this", "/memories/new?event=e7"),
    ("approvals", "/approvals"),
    ("history", "/history"),
    ("sessions", "/history/sessions"),
    ("session", f"/history/sessions/{SESSION}"),
    ("history-search", "/history/search?q=refund+database&mode=keyword"),
    ("context", "/context"),
    ("health", "/health"),
)
"""(file name, path) of each picture; ``{name}`` is a demo memory's id."""
WIDTH, HEIGHT = 1200, 860
PHONE = 360


def shoot(out: Path) -> list[Path]:
    """Build the demo, serve it, and write ``<page>-<theme>.png`` (and a phone-sized memory page)."""
    from playwright.sync_api import sync_playwright

    from korg_bridge.recall.console.app import Settings, build_app
    from tests.helpers.browser import launched
    from tests.helpers.console import live_server

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="korg-recall-demo-") as scratch:
        demo = build_demo(Path(scratch) / "home")
        os.environ.update(demo.env)  # the brief and the hooks' status read the process's too
        app = build_app(Settings(env=demo.env, cwd=str(demo.project)))
        with live_server(app) as url, sync_playwright() as playwright, launched(playwright) as browser:
            for scheme in ("light", "dark"):
                context = browser.new_context(
                    color_scheme=scheme,  # type: ignore[arg-type]
                    viewport={"width": WIDTH, "height": HEIGHT},
                    reduced_motion="reduce",
                )
                page = context.new_page()
                for name, path in PAGES:
                    page.goto(url + path.format(**demo.memories))
                    page.wait_for_load_state("load")
                    target = out / f"{name}-{scheme}.png"
                    page.screenshot(path=str(target))
                    written.append(target)
                context.close()
                phone = browser.new_context(
                    color_scheme=scheme,  # type: ignore[arg-type]
                    viewport={"width": PHONE, "height": 740},
                    reduced_motion="reduce",
                )
                page = phone.new_page()
                page.goto(url + f"/memories/{demo.memories['refunds']}")
                target = out / f"phone-memory-{scheme}.png"
                page.screenshot(path=str(target))
                written.append(target)
                phone.close()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs") / "console", help="where the PNGs go")
    args = parser.parse_args(argv)
    for path in shoot(args.out):
        sys.stderr.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

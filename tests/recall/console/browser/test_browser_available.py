"""The browser suite's one line when it cannot run here (no chromium, or no Playwright)."""

from __future__ import annotations

import pytest

from tests.helpers.browser import browser_missing


def test_the_browser_tests_can_run_here() -> None:
    missing = browser_missing()
    if missing is not None:
        pytest.skip(missing)

"""The complexity and argument-count limits hold for all of ``korg_bridge/``, with no way around them."""

from __future__ import annotations

import re
import tomllib

from tests.helpers.paths import REPO


def test_ruff_limits_complexity_and_arguments_with_no_exemption_in_the_package() -> None:
    lint = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    assert {"C901", "PLR0913"} <= set(lint["select"])
    assert lint["mccabe"]["max-complexity"] == 15
    assert lint["pylint"]["max-args"] == 8
    for pattern, rules in lint.get("per-file-ignores", {}).items():
        if {"C901", "PLR0913"} & set(rules):
            assert pattern.startswith("tests/"), pattern
    assert not {"C901", "PLR0913"} & set(lint.get("ignore", []))
    noqa = re.compile(r"#\s*noqa\b[^\n]*\b(C901|PLR0913)\b")
    found = [
        f"{path.relative_to(REPO)}"
        for path in sorted((REPO / "korg_bridge").rglob("*.py"))
        if noqa.search(path.read_text(encoding="utf-8"))
    ]
    assert found == []

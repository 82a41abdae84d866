"""Yes/no environment switches: one parser (korg_bridge.config) for every KORG_* on/off variable."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping

import pytest

from korg_bridge.config import (
    OFF_WORDS,
    ON_WORDS,
    allow_secrets,
    background,
    claude_memory,
    claude_writeback,
    ledger_key,
    mirror_on,
    switch,
    writes_mode,
)
from korg_bridge.errors import ConfigError
from tests.helpers.paths import REPO


@pytest.mark.parametrize("word", ["1", "true", "yes", "on", "ON", " True ", "Yes"])
def test_every_yes_word_switches_on_whatever_the_default(word: str) -> None:
    assert switch({"KORG_X": word}, "KORG_X", False) is True
    assert switch({"KORG_X": word}, "KORG_X", True) is True


@pytest.mark.parametrize("word", ["0", "false", "no", "off", "OFF", " False ", "No"])
def test_every_no_word_switches_off_whatever_the_default(word: str) -> None:
    assert switch({"KORG_X": word}, "KORG_X", True) is False
    assert switch({"KORG_X": word}, "KORG_X", False) is False


@pytest.mark.parametrize("env", [{}, {"KORG_X": ""}, {"KORG_X": "   "}])
def test_unset_or_empty_means_the_default(env: dict[str, str]) -> None:
    assert switch(env, "KORG_X", True) is True
    assert switch(env, "KORG_X", False) is False


@pytest.mark.parametrize("value", ["maybe", "2", "enabled", "y", "n", "onn", "1 0"])
def test_any_other_value_is_a_config_error_naming_the_variable(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        switch({"KORG_X": value}, "KORG_X", True)
    assert caught.value.exit_code == 3
    assert caught.value.message.startswith(f"KORG_X={value!r} is not a yes/no value")
    assert "1, true, yes or on" in caught.value.message and "0, false, no or off" in caught.value.message


def test_no_module_but_the_switches_module_spells_the_yes_no_words() -> None:
    """A switch parsed anywhere else could again mean one thing here and another there."""
    words = re.compile(r"""["'][10]["']\s*,\s*["'](?:true|false|yes|no|on|off)["']""")
    found = [
        str(path.relative_to(REPO))
        for path in (REPO / "korg_bridge").rglob("*.py")
        if path.name != "config.py" and words.search(path.read_text(encoding="utf-8"))
    ]
    assert found == []


# --- one typed accessor per variable ---------------------------------------------------------------

READERS = ("korg_bridge/config.py", "korg_bridge/recall/paths.py")
"""Where an environment variable's text may be read: the settings, and the paths."""
ALLOWED_READS = {
    (
        "korg_bridge/toolkit/parsing.py",
        "COLUMNS",
    ): "the terminal's width, for help text: not a setting of ours",
}
"""The few other reads, and why each is legitimate."""


PREFIXES = ("ENV_", "KORG_", "CLAUDE_", "CODEX_")
"""Our variables' constants and names, and Claude Code's and Codex's."""


def _variable(node: ast.expr) -> str | None:
    """The variable a key names: a ``ENV_*`` constant or a string literal (else None)."""
    if isinstance(node, ast.Name) and node.id.startswith("ENV_"):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _of_os(func: ast.expr) -> bool:
    """``os.getenv`` or ``os.environ.get``: whatever they read is the process's environment."""
    text = ast.unparse(func)
    return text in ("os.getenv", "os.environ.get", "getenv", "environ.get")


def _environment_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, variable)`` of every ``X.get(VAR)``, ``X[VAR]`` (read) and ``os.getenv(VAR)``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        key: ast.expr | None = None
        anything = False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name) and node.args:
            anything = _of_os(node.func)
            if anything or (isinstance(node.func, ast.Attribute) and node.func.attr == "get"):
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        name = _variable(key) if key is not None else None
        if name is not None and (anything or name.startswith(PREFIXES)):
            found.append((node.lineno, name))
    return sorted(found)


def test_no_module_reads_an_environment_variable_but_the_settings_and_the_paths() -> None:
    """A variable read in two places is a variable that can mean two things (``=on`` showed
    secrets in memories while history stayed redacted): every other module asks an accessor."""
    stray = []
    for path in sorted((REPO / "korg_bridge").rglob("*.py")):
        rel = str(path.relative_to(REPO))
        if rel in READERS:
            continue
        for line, name in _environment_reads(ast.parse(path.read_text(encoding="utf-8"))):
            if (rel, name) not in ALLOWED_READS:
                stray.append(f"{rel}:{line}: {name}")
    assert stray == []


def test_the_scan_sees_each_way_of_reading_a_variable() -> None:
    code = 'a = env.get(ENV_RECALL_WRITES, "")\nb = env["KORG_X"]\nc = os.getenv("KORG_Y")\nd = os.environ.get("CLAUDE_Z")\n'
    assert [name for _, name in _environment_reads(ast.parse(code))] == [
        "ENV_RECALL_WRITES",
        "KORG_X",
        "KORG_Y",
        "CLAUDE_Z",
    ]


@pytest.mark.parametrize(
    ("accessor", "name", "default"),
    [
        (allow_secrets, "KORG_RECALL_ALLOW_SECRETS", False),
        (background, "KORG_RECALL_BACKGROUND", True),
        (claude_memory, "KORG_RECALL_CLAUDE_MEMORY", True),
        (claude_writeback, "KORG_RECALL_CLAUDE_WRITEBACK", False),
        (mirror_on, "KORG_RECALL_MIRROR", True),
    ],
)
def test_every_yes_no_setting_takes_the_same_words_and_names_itself_when_wrong(
    accessor: Callable[[Mapping[str, str]], bool], name: str, default: bool
) -> None:
    assert accessor({}) is default
    for word in ON_WORDS:
        assert accessor({name: word.upper()}) is True
    for word in OFF_WORDS:
        assert accessor({name: f" {word.title()} "}) is False
    with pytest.raises(ConfigError) as caught:
        accessor({name: "enabled"})
    assert caught.value.exit_code == 3 and caught.value.message.startswith(
        f"{name}='enabled' is not a yes/no value"
    )


def test_the_writes_mode_is_one_of_three_words_or_a_config_error_naming_it() -> None:
    assert writes_mode({}) == "auto"
    assert writes_mode({"KORG_RECALL_WRITES": " Confirm "}) == "confirm"
    with pytest.raises(ConfigError, match=r"^KORG_RECALL_WRITES='maybe' is not one of auto, confirm, off\.$"):
        writes_mode({"KORG_RECALL_WRITES": "maybe"})


def test_the_ledger_key_is_taken_as_set_and_an_empty_one_is_none() -> None:
    assert ledger_key({}) is None
    assert ledger_key({"KORG_LEDGER_KEY": ""}) is None
    assert ledger_key({"KORG_LEDGER_KEY": " k\u00e9y "}) == " k\u00e9y ".encode()

"""Yes/no environment switches: one parser (korg_bridge.config) for every KORG_* on/off variable."""

from __future__ import annotations

import re

import pytest

from korg_bridge.config import switch
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

"""The side-effect gate, exactly as KORG_INTROSPECT_MCP_ALLOW means it in the ecosystem."""

from __future__ import annotations

import pytest

from korg_bridge.bridge.contract import parse_document
from korg_bridge.bridge.policy import Policy
from korg_bridge.errors import ConfigError, UsageError


def spec(side_effects: str | None, output_mode: str = "stream"):  # type: ignore[no-untyped-def]
    caps: dict[str, str] = {"output_mode": output_mode}
    if side_effects is not None:
        caps["side_effects"] = side_effects
    doc = parse_document(
        {
            "schema": "korg:introspect@v1",
            "binary": "b",
            "callables": [
                {"command_id": "b.x", "name": "x", "input_schema": {"type": "object"}, "capabilities": caps}
            ],
        }
    )
    return doc.callables[0]


@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        (None, {"none", "fs_read"}),
        ("", {"none", "fs_read"}),
        ("fs_write", {"none", "fs_read", "fs_write"}),
        (" FS_WRITE , Network ", {"none", "fs_read", "fs_write", "network"}),
        ("ledger_write,", {"none", "fs_read", "ledger_write"}),
        ("all", {"none", "fs_read", "fs_write", "network", "ledger_write"}),
        ("*", {"none", "fs_read", "fs_write", "network", "ledger_write"}),
        ("ALL", {"none", "fs_read", "fs_write", "network", "ledger_write"}),
    ],
)
def test_policy_table(value: str | None, allowed: set[str]) -> None:
    policy = Policy.from_env({} if value is None else {"KORG_INTROSPECT_MCP_ALLOW": value})
    for effect in ("none", "fs_read", "fs_write", "network", "ledger_write"):
        assert policy.check(spec(effect)).allowed == (effect in allowed), effect


def test_an_unknown_allow_value_is_a_usage_error_naming_it_and_the_known_ones() -> None:
    with pytest.raises(UsageError) as caught:
        Policy.parse("fs_write, fs_writ ,teleport")
    assert caught.value.exit_code == 2
    assert caught.value.message == (
        '--allow has unknown values "fs_writ" (did you mean fs_write?), "teleport": '
        "pass a comma-separated list of fs_write, network, ledger_write, or all."
    )


def test_an_unknown_value_in_the_environment_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        Policy.from_env({"KORG_INTROSPECT_MCP_ALLOW": "fs_write,netwrok"})
    assert caught.value.exit_code == 3
    assert caught.value.message.startswith(
        'KORG_INTROSPECT_MCP_ALLOW has an unknown value "netwrok" (did you mean network?): set it to'
    )


@pytest.mark.parametrize("effect", [None, "teleport", "FS_WRITE"])
def test_missing_or_unknown_side_effects_fail_closed(effect: str | None) -> None:
    for value in ("fs_write,network,ledger_write", ""):
        decision = Policy.parse(value).check(spec(effect))
        assert not decision.allowed
        assert "KORG_INTROSPECT_MCP_ALLOW=all" in decision.reason
    assert Policy.parse("all").check(spec(effect)).allowed


def test_session_is_refused_even_under_all() -> None:
    decision = Policy.parse("all").check(spec("none", output_mode="session"))
    assert not decision.allowed
    assert "session" in decision.reason and "terminal" in decision.reason


def test_denial_names_the_exact_value_that_would_allow_it() -> None:
    decision = Policy.from_env({"KORG_INTROSPECT_MCP_ALLOW": "network"}).check(spec("fs_write"))
    assert "KORG_INTROSPECT_MCP_ALLOW=fs_write,network" in decision.reason
    decision = Policy().check(spec("ledger_write"))
    assert "KORG_INTROSPECT_MCP_ALLOW=ledger_write" in decision.reason


def test_allow_flag_overrides_environment_value() -> None:
    policy = Policy.parse("", source="--allow")
    assert not policy.check(spec("fs_write")).allowed
    assert "--allow" in policy.describe()


def test_describe_names_the_source() -> None:
    assert "default" in Policy().describe()
    assert "KORG_INTROSPECT_MCP_ALLOW" in Policy.from_env({"KORG_INTROSPECT_MCP_ALLOW": "network"}).describe()
    assert "all side effects" in Policy.parse("*").describe()

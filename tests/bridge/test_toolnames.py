"""Tool names every client accepts, stable and collision-free."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from korg_bridge.bridge.toolnames import SAFE_NAME_RE, assign_names, safe_name


def test_dots_become_underscores() -> None:
    assert safe_name("korg.rewind") == "korg_rewind"
    assert safe_name("korgex.install-extension") == "korgex_install-extension"


def test_long_names_are_shortened_with_a_stable_hash() -> None:
    cid = "dotted-long." + "x" * 100
    name = safe_name(cid)
    assert len(name) == 64 and SAFE_NAME_RE.match(name)
    assert safe_name(cid) == name


def test_collisions_are_resolved_deterministically() -> None:
    ids = ["a.b", "a_b", "a-b"]
    first = assign_names(ids)
    assert first["a_b"] == "a_b"  # already a valid name: never renamed
    assert len(set(first.values())) == 3
    assert assign_names(list(reversed(ids))) == first


def test_command_id_style_keeps_names() -> None:
    assert assign_names(["korg.rewind"], "command-id") == {"korg.rewind": "korg.rewind"}
    with pytest.raises(ValueError, match="unknown tool-name style"):
        assign_names(["x"], "fancy")


@given(st.lists(st.text(min_size=1, max_size=120), unique=True, max_size=12))
def test_every_assigned_name_is_valid_and_unique(ids: list[str]) -> None:
    names = assign_names(ids)
    assert len(set(names.values())) == len(ids)
    assert all(SAFE_NAME_RE.match(n) for n in names.values())

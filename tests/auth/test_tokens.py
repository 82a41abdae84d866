"""The token file: several tokens, each with a tenant and an actor, read into
SHA-256 digests; malformed files named by line, never by their content."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from korg_bridge.auth.identity import Identity, child_environment, request_identity
from korg_bridge.auth.tokens import (
    MAX_FILE_BYTES,
    Keyring,
    TokenSet,
    load_tokens,
    parse_tokens,
    read_token_file,
)
from korg_bridge.config import ENV_BRIDGE_ACTOR, ENV_BRIDGE_AUDIT, ENV_BRIDGE_TENANT, ENV_BRIDGE_TRANSPORT
from korg_bridge.errors import ConfigError

ANA = "tok-ana-7Hq2vX9pLm3Rk8Wz"
CI = "tok-ci-0aB1cD2eF3gH4iJ5"
OPS = "tok-ops-ZyXwVuTsRqPoNmLk"

FILE = f"""# tokens of the team bridge
{ANA}  acme  ana@example.com

{CI}\tacme\tci:nightly  # the nightly runner
   # an indented comment
{OPS} #acme: a comment, not a tenant
"""


def write(tmp_path: Path, text: str | bytes, mode: int = 0o600) -> Path:
    path = tmp_path / "tokens"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    path.chmod(mode)
    return path


def test_each_line_gives_a_token_its_tenant_and_actor() -> None:
    tokens = parse_tokens(FILE, "token file t")
    assert len(tokens) == 3
    ana, ci, ops = (tokens.match(t.encode()) for t in (ANA, CI, OPS))
    assert ana is not None and (ana.tenant, ana.actor) == ("acme", "ana@example.com")
    assert ci is not None and (ci.tenant, ci.actor) == ("acme", "ci:nightly")
    assert ops is not None and (ops.tenant, ops.actor) == (None, None)
    assert ana.where == "line 2 of t" and ci.where == "line 4 of t"
    assert len({ana.key, ci.key, ops.key}) == 3
    assert tokens.summary() == "3 tokens, 1 tenant"


@pytest.mark.parametrize("presented", ["", ANA[:-1], ANA + "x", ANA.upper(), f"{ANA} acme", "acme"])
def test_anything_but_an_exact_token_matches_nothing(presented: str) -> None:
    assert parse_tokens(FILE, "token file t").match(presented.encode()) is None


def test_only_digests_are_kept() -> None:
    tokens = parse_tokens(FILE, "token file t")
    kept = repr(tokens).encode() + b"".join(digest for digest, _ in tokens.entries)
    for token in (ANA, CI, OPS):
        assert token.encode() not in kept
        assert token not in repr(tokens)


def test_a_file_holding_one_token_alone_works_as_before(tmp_path: Path) -> None:
    tokens = load_tokens({}, str(write(tmp_path, f"{ANA}\n")))
    assert tokens is not None and len(tokens) == 1
    identity = tokens.match(ANA.encode())
    assert identity is not None and identity.tenant is None and identity.actor is None


def test_the_file_wins_over_the_variable_which_is_one_token_without_a_tenant(tmp_path: Path) -> None:
    path = write(tmp_path, FILE)
    from_file = load_tokens({"KORG_BRIDGE_TOKEN": CI}, str(path))
    assert from_file is not None and len(from_file) == 3
    from_env = load_tokens({"KORG_BRIDGE_TOKEN": f" {CI}\n"}, None)
    assert from_env is not None and from_env.source == "KORG_BRIDGE_TOKEN"
    identity = from_env.match(CI.encode())
    assert identity is not None and identity.tenant is None
    assert load_tokens({}, None) is None


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        (f"{ANA} acme ana extra\n", "line 1: expected TOKEN [TENANT [ACTOR]], got 4 fields"),
        (f"# c\n{ANA} ac/me\n", "line 2: the tenant (field 2) must be 1-64 letters"),
        (f"{ANA} {'t' * 65}\n", "line 1: the tenant (field 2)"),
        (f"{ANA} -acme\n", "line 1: the tenant (field 2)"),
        (f"{ANA} acme ana;rm\n", "line 1: the actor (field 3) must be 1-128"),
        (f"{ANA} acme {'a' * 129}\n", "line 1: the actor (field 3)"),
        (f"\n\n{ANA}é acme\n", "line 3: the token must be printable ASCII"),
        (f"{ANA} acme\n{CI} acme\n{ANA} globex\n", "line 3: the token of line 1 again"),
    ],
    ids=[
        "four-fields",
        "bad-tenant",
        "long-tenant",
        "dash-tenant",
        "bad-actor",
        "long-actor",
        "non-ascii",
        "dup",
    ],
)
def test_a_malformed_line_is_named_by_number_without_its_content(
    tmp_path: Path, text: str, phrase: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_tokens({}, str(path))
    message = caught.value.message
    assert caught.value.exit_code == 3
    assert message.startswith(f"token file {path}, {phrase}")
    assert "\n" not in message
    for secret in (ANA, CI, "ac/me", "ana;rm", "t" * 65):
        assert secret not in message


@pytest.mark.parametrize("text", ["", "\n  \n", "# only a comment\n"])
def test_a_file_without_a_token_is_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="holds no token") as caught:
        load_tokens({}, str(write(tmp_path, text)))
    assert caught.value.exit_code == 3


def test_a_token_file_others_can_read_is_warned_about_without_the_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert load_tokens({}, str(write(tmp_path, FILE, 0o644))) is not None
    assert "readable by other users" in caplog.text and "chmod 600" in caplog.text
    assert ANA not in caplog.text


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_a_token_file_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    with pytest.raises(ConfigError, match="can be written by other users") as caught:
        load_tokens({}, str(write(tmp_path, FILE, mode)))
    assert "chmod 600" in caught.value.message


def test_a_short_token_is_warned_about_by_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        load_tokens({}, str(write(tmp_path, f"{ANA} acme\nshort1 acme\n")))
    assert "line 2: a token of 6 characters is easy to guess" in caplog.text
    assert "short1" not in caplog.text


def test_a_fifo_is_refused_at_once_rather_than_read(tmp_path: Path) -> None:
    fifo = tmp_path / "tokens"
    os.mkfifo(fifo, 0o600)
    outcome: list[BaseException] = []
    thread = threading.Thread(target=lambda: outcome.append(_raises(str(fifo))), daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "reading a FIFO hung"
    assert isinstance(outcome[0], ConfigError) and "is not a regular file" in str(outcome[0])


def _raises(path: str) -> BaseException:
    try:
        read_token_file(path)
    except BaseException as exc:  # handed to the test thread
        return exc
    return AssertionError("no error")


@pytest.mark.parametrize(
    ("content", "phrase"),
    [(b"x" * (MAX_FILE_BYTES + 1), "is over 1024 KiB"), (b"\xff\xfe token\n", "is not UTF-8 text")],
)
def test_an_oversized_or_binary_file_is_refused(tmp_path: Path, content: bytes, phrase: str) -> None:
    with pytest.raises(ConfigError, match=phrase):
        load_tokens({}, str(write(tmp_path, content)))


def test_a_missing_file_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Check the path given to --token-file") as caught:
        load_tokens({}, str(tmp_path / "nope"))
    assert caught.value.exit_code == 3


def test_a_reload_replaces_the_set_whole_or_keeps_it(tmp_path: Path) -> None:
    path = write(tmp_path, FILE)
    keyring = Keyring(parse_tokens(FILE, "token file t"), str(path))
    path.write_text(f"{ANA} acme ana\n{OPS} globex\n")
    keyring.reload()
    assert keyring.match(CI.encode()) is None
    ops = keyring.match(OPS.encode())
    assert ops is not None and ops.tenant == "globex"
    path.write_text(f"{ANA} acme\n{CI} bad/tenant\n")
    with pytest.raises(ConfigError, match="line 2"):
        keyring.reload()
    assert keyring.match(OPS.encode()) is not None  # the old set is still in force
    assert Keyring(TokenSet.single(ANA)).path is None
    with pytest.raises(ConfigError, match="pass --token-file"):
        Keyring(TokenSet.single(ANA)).reload()


# --- the identity a call carries into its process --------------------------------------


def test_over_http_the_child_gets_the_token_s_names_and_nothing_inherited() -> None:
    base = {"PATH": "/bin", ENV_BRIDGE_TENANT: "stale", ENV_BRIDGE_ACTOR: "stale", "KORG_BRIDGE_TOKEN": ANA}
    named = child_environment(base, Identity("acme", "ana", key="k"))
    assert named == {
        "PATH": "/bin",
        ENV_BRIDGE_TRANSPORT: "http",
        ENV_BRIDGE_TENANT: "acme",
        ENV_BRIDGE_ACTOR: "ana",
    }
    tenant_only = child_environment(base, Identity("acme", key="k"))
    assert tenant_only == {"PATH": "/bin", ENV_BRIDGE_TRANSPORT: "http", ENV_BRIDGE_TENANT: "acme"}
    assert child_environment(base, Identity()) == {"PATH": "/bin", ENV_BRIDGE_TRANSPORT: "http"}
    assert base[ENV_BRIDGE_TENANT] == "stale"  # the bridge's own mapping is not changed


def test_over_http_the_child_is_told_the_audit_ledger_it_must_keep_from_callers() -> None:
    env = child_environment({"PATH": "/bin"}, Identity("acme", key="k"), audit="/var/lib/korg/audit.jsonl")
    assert env is not None and env[ENV_BRIDGE_AUDIT] == "/var/lib/korg/audit.jsonl"


def test_without_an_http_request_the_environment_is_left_alone() -> None:
    base = {ENV_BRIDGE_TENANT: "set-by-the-operator"}
    assert child_environment(base, None) is base
    assert child_environment(None, None) is None
    assert request_identity(None) is None


@pytest.mark.parametrize(("tenant", "actor"), [("a b", None), ("acme", "x\n"), ("", None), ("acme", "")])
def test_an_identity_with_names_unsafe_for_an_environment_cannot_be_made(
    tenant: str, actor: str | None
) -> None:
    with pytest.raises(ConfigError):
        Identity(tenant, actor)


@pytest.mark.parametrize("actor", ["user", "User", "mirror", "claude", "import"])
def test_a_token_cannot_take_an_actor_name_korg_recall_keeps_for_other_writers(actor: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_tokens(f"{ANA} acme {actor}\n", "token file t")
    assert caught.value.exit_code == 3
    assert (
        f"token file t, line 1: the actor (field 3) {actor!r} is a name korg-recall keeps"
        in caught.value.message
    )

"""A caller walled into its tenant reads only the history the operator gave it.

These run korg-recall's command line in process with the environment the HTTP bridge gives a
call (``KORG_BRIDGE_TRANSPORT=http``, ``KORG_BRIDGE_TENANT``); the whole deployment, attacked
through every tool, is tests/recall/memory/test_tenant_walls.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from korg_bridge.config import ENV_RECALL_TENANT_LEDGERS
from korg_bridge.errors import ConfigError, UsageError
from korg_bridge.recall.cli.app import main
from korg_bridge.recall.history.ingest.sources import list_file_paths
from korg_bridge.recall.history.walls import TenantHistory, history_of, parse_grants
from korg_bridge.recall.tenancy import actor_from, tenant_from, walled

Run = Callable[..., tuple[int, str, str]]


def ledger(path: Path, *texts: str) -> Path:
    """A legacy flat ledger of one typed prompt per text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        {
            "seq": seq,
            "source_agent": "agent:korgex@0.2.2",
            "tool_name": "user_prompt",
            "args": {"prompt": text},
        }
        for seq, text in enumerate(texts, start=1)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def grants_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tenant-ledgers"
    path.write_text(text)
    path.chmod(0o600)
    return path


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two tenants' history folders, a file of the operator's, and the shared index with all of it."""
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    history = tmp_path / "history"
    ledger(history / "acme" / "a.jsonl", "acme deploys the parrot service on tuesdays")
    ledger(history / "globex" / "g.jsonl", "globex parrot launch code is ZEBRA-7731")
    ledger(history / "team" / "t.jsonl", "the team parrot standup is at nine")
    ledger(tmp_path / "var" / "audit.jsonl", "an audit line quoting parrot WALRUS-5521")
    (history / "acme" / "escape.jsonl").symlink_to(history / "globex" / "g.jsonl")
    (history / "acme" / "escape-dir").symlink_to(history / "globex")
    config = grants_file(
        tmp_path,
        f"# TENANT PATH\nacme {history / 'acme'}\nacme {tmp_path / 'var'}\n"
        f"globex {history / 'globex'}\n* {history / 'team'}\n",
    )
    monkeypatch.setenv(ENV_RECALL_TENANT_LEDGERS, str(config))
    monkeypatch.setenv("KORG_BRIDGE_AUDIT", str(tmp_path / "var" / "audit.jsonl"))
    monkeypatch.chdir(tmp_path)
    # The operator, at the server, indexes everything (links followed, the audit ledger too).
    code = main(["index", "--no-embed", "--ledger", str(history), "--ledger", str(tmp_path / "var")])
    assert code == 0
    return tmp_path


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    def call(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as exc:  # pragma: no cover - the toolkit returns codes
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return call


@pytest.fixture
def as_acme(server: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the HTTP bridge sets for a call of acme's token (and an operator's stale variable),
    once the operator indexed everything."""
    monkeypatch.setenv("KORG_BRIDGE_TRANSPORT", "http")
    monkeypatch.setenv("KORG_BRIDGE_TENANT", "acme")
    monkeypatch.setenv("KORG_RECALL_TENANT", "globex")


def every_text(run: Run) -> str:
    """All acme can get out of the index without naming a path: hits, every ref, stats."""
    outputs = [run("recall", "--query", "parrot", "--mode", "keyword", "--top-n", "50", "--json")[1]]
    outputs += [run("show", f"e{n}")[1] for n in range(1, 12)]
    outputs.append(run("stats")[1])
    return "\n".join(outputs)


# --- who is walled in ----------------------------------------------------------------------------


def test_over_http_a_token_without_a_tenant_never_inherits_the_bridge_s_tenant_or_actor() -> None:
    env = {"KORG_BRIDGE_TRANSPORT": "http", "KORG_RECALL_TENANT": "acme", "KORG_RECALL_ACTOR": "user"}
    assert tenant_from(env) is None and actor_from(env) is None
    assert tenant_from({"KORG_RECALL_TENANT": "acme"}) == "acme"  # a person at a terminal sets it


def test_only_a_caller_over_http_with_a_tenant_or_a_team_store_is_walled() -> None:
    assert walled({"KORG_BRIDGE_TRANSPORT": "http", "KORG_BRIDGE_TENANT": "acme"})
    assert walled({"KORG_BRIDGE_TRANSPORT": "http", "KORG_RECALL_STORE": "postgresql://db/korg"})
    assert not walled({"KORG_BRIDGE_TRANSPORT": "http"})  # the operator's token, a SQLite store
    assert not walled({"KORG_RECALL_TENANT": "acme", "KORG_RECALL_STORE": "postgresql://db/korg"})


def test_each_tenant_has_its_own_sqlite_store_beside_the_shared_one(tmp_path: Path) -> None:
    from korg_bridge.recall.paths import store_location

    env = {"KORG_RECALL_STORE": str(tmp_path / "memory.sqlite")}
    acme = store_location({**env, "KORG_BRIDGE_TRANSPORT": "http", "KORG_BRIDGE_TENANT": "acme"}).path
    shared = store_location({**env, "KORG_BRIDGE_TRANSPORT": "http", "KORG_RECALL_TENANT": "acme"}).path
    named = store_location({**env, "KORG_RECALL_TENANT": "acme"}).path  # a team store's tenant, at a terminal
    assert acme == tmp_path / "tenants" / "acme" / "memory.sqlite"
    assert shared == named == tmp_path / "memory.sqlite"


# --- the operator's file ---------------------------------------------------------------------------


def test_the_operator_s_file_gives_folders_to_tenants_and_to_every_tenant(tmp_path: Path) -> None:
    grants = parse_grants(f"# comment\n\nacme  {tmp_path}/a/../a\n*\t{tmp_path}/shared dir\n", "F")
    assert [(g.tenant, g.path, g.line) for g in grants] == [
        ("acme", f"{tmp_path}/a", 3),
        ("*", f"{tmp_path}/shared dir", 4),
    ]


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("acme\n", "line 1: expected TENANT PATH"),
        ("acme history/acme\n", "line 1: the path must be absolute"),
        ("acme ~/history\n", "the path must be absolute"),
        ("bad/name /srv/x\n", "line 1: the tenant (field 1) must be"),
        ("acme /srv/h\nglobex /srv/h/globex\n", "/srv/h/globex (line 2, tenant globex) lies inside /srv/h"),
        ("* /srv/h\nglobex /srv/h/globex\n", "lies inside /srv/h (line 1, every tenant)"),
    ],
    ids=["one-field", "relative", "tilde", "tenant-name", "nested", "nested-in-shared"],
)
def test_a_bad_line_of_the_operator_s_file_is_a_config_error_naming_it(text: str, phrase: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_grants(text, "F")
    assert phrase in caught.value.message and caught.value.exit_code == 3


def test_shared_folders_inside_a_tenant_s_and_a_folder_given_to_two_tenants_are_fine() -> None:
    parse_grants(
        "acme /srv/h\n* /srv/h/team\nacme /srv/x\nglobex /srv/x\nacme /srv/x/y\nglobex /srv/x/y\n", "F"
    )


def test_an_operator_s_file_other_users_can_write_is_refused(tmp_path: Path) -> None:
    config = grants_file(tmp_path, "acme /srv/h\n")
    config.chmod(0o666)
    env = {
        "KORG_BRIDGE_TRANSPORT": "http",
        "KORG_BRIDGE_TENANT": "acme",
        ENV_RECALL_TENANT_LEDGERS: str(config),
    }
    with pytest.raises(ConfigError, match="can be written by other users"):
        history_of(env)


# --- paths a walled caller passes ------------------------------------------------------------------


def test_a_path_outside_is_refused_alike_whether_it_exists_or_not(tmp_path: Path) -> None:
    (tmp_path / "other.jsonl").write_text("{}\n")
    walls = TenantHistory("acme", (str(tmp_path / "a"),), (str(tmp_path / "a"),))
    messages = []
    for name in ("other.jsonl", "nothing-here.jsonl"):
        with pytest.raises(UsageError) as caught:
            walls.confine(str(tmp_path / name), {"HOME": str(tmp_path)})
        messages.append(caught.value.message.replace(name, "X"))
    assert messages[0] == messages[1]
    assert "not in the history tenant acme may read" in messages[0]


@pytest.mark.parametrize(
    "raw",
    [
        "{root}/a/../b/x.jsonl",
        "{root}/a/link/x.jsonl",
        "{root}/a/link",
        "~/b/x.jsonl",
        "../b/x.jsonl",
        "./../b",
        "{root}",
        "/",
        "/proc/self/environ",
    ],
)
def test_no_spelling_of_a_path_leads_out_of_the_walls(
    tmp_path: Path, raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    ledger(tmp_path / "b" / "x.jsonl", "theirs")
    (tmp_path / "a" / "link").symlink_to(tmp_path / "b")
    walls = TenantHistory("acme", (str(tmp_path / "a"),), (str(tmp_path / "a"),))
    monkeypatch.chdir(tmp_path / "a")  # relative paths are the server's working directory's
    with pytest.raises(UsageError, match="not in the history tenant acme may read"):
        walls.confine(raw.format(root=tmp_path), {"HOME": str(tmp_path)})


def test_an_environment_variable_in_a_path_is_two_letters_of_a_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    walls = TenantHistory("acme", (str(tmp_path / "a"),), (str(tmp_path / "a"),))
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    found = walls.confine("$HOME/b/x.jsonl", {"HOME": str(tmp_path)})
    assert found == tmp_path / "a" / "$HOME" / "b" / "x.jsonl"


def test_a_folder_scan_never_follows_a_link_out_of_the_walls(tmp_path: Path) -> None:
    mine = ledger(tmp_path / "a" / "mine.jsonl", "mine")
    ledger(tmp_path / "b" / "x.jsonl", "theirs")
    (tmp_path / "a" / "out.jsonl").symlink_to(tmp_path / "b" / "x.jsonl")
    (tmp_path / "a" / "out").symlink_to(tmp_path / "b")
    (tmp_path / "a" / "in.jsonl").symlink_to(mine)
    walls = TenantHistory("acme", (str(tmp_path / "a"),), (str(tmp_path / "a"),))
    assert list_file_paths([tmp_path / "a"], walls) == [str(mine)]


# --- through the command line, as the bridge runs it ---------------------------------------------


@pytest.mark.usefixtures("as_acme")
def test_a_tenant_finds_its_own_and_the_team_s_history_and_nothing_else(server: Path, run: Run) -> None:
    code, out, err = run("recall", "--query", "parrot", "--mode", "keyword", "--top-n", "50")
    assert code == 0, err
    assert "tuesdays" in out and "standup" in out
    text = every_text(run)
    assert "tuesdays" in text
    for secret in ("ZEBRA-7731", "WALRUS-5521", "globex", "audit.jsonl"):
        assert secret not in text


@pytest.mark.usefixtures("as_acme")
@pytest.mark.parametrize(
    "raw",
    [
        "history/globex",
        "{root}/history/acme/escape.jsonl",
        "{root}/history/acme/escape-dir",
        "{root}/var/audit.jsonl",
    ],
    ids=["other-tenant", "link-to-a-file", "link-to-a-folder", "audit-in-a-granted-folder"],
)
def test_a_tenant_s_ledger_argument_cannot_reach_another_s_file(server: Path, run: Run, raw: str) -> None:
    code, out, err = run(
        "recall", "--query", "parrot", "--mode", "keyword", "--ledger", raw.format(root=server)
    )
    assert code == 2 and out == ""
    assert "is not in the history tenant acme may read" in err
    code, out, err = run("verify", "--path", raw.format(root=server))
    assert code == 2 and "WALRUS" not in out + err


@pytest.mark.usefixtures("as_acme")
def test_a_tenant_may_not_prune_the_index_everyone_shares(server: Path, run: Run) -> None:
    code, _, err = run("prune", "--gone")
    assert code == 2 and "only the operator may run it" in err


@pytest.mark.usefixtures("as_acme")
def test_a_tenant_reads_its_own_memory_log(server: Path, run: Run) -> None:
    code, out, err = run("remember", "--content", "acme parrot cage is blue", "--type", "project")
    assert code == 0, err
    memory_id = json.loads(out)["id"]
    code, out, err = run("recall", "--query", memory_id, "--mode", "keyword", "--kinds", "history", "--json")
    assert code == 0, err
    assert [hit["tool"] for hit in json.loads(out)["hits"]] == ["memory.remember"]


def test_without_the_bridge_s_http_nothing_is_walled(
    server: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KORG_RECALL_TENANT", "acme")  # a person at the server
    code, out, _ = run(
        "recall", "--query", "parrot", "--mode", "keyword", "--top-n", "50", "--ledger", "history"
    )
    assert code == 0 and "ZEBRA-7731" in out

"""``korg-recall`` as a user (or the bridge) runs it: output format, every callable, the
ledger's life on disk (appended, truncated, new files), a corrupt index, hostile queries,
secrets, filters, concurrency, and the ``--introspect`` contract.

Most runs call :func:`korg_bridge.recall.cli.app.main` in-process (fast, with ``capsys``); a
few spawn ``python -m korg_bridge.recall.cli.app`` for what only a real process shows (the
warning on stderr, two processes sharing one index, the exit status).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from korg_bridge.bridge.argv import build_argv
from korg_bridge.bridge.contract import contract_schema, parse_document
from korg_bridge.recall.cli.app import kit, main
from tests.helpers.cli import call_recall
from tests.helpers.paths import REPO

SNAPSHOT = Path(__file__).resolve().parent / "introspect.snapshot.json"
REGENERATE = (
    f"{sys.executable} -m korg_bridge.recall.cli.app --introspect > tests/recall/cli/introspect.snapshot.json"
)

HEADER = re.compile(r"^\[recall · (substring|keyword|semantic|hybrid)\] (\d+) match\(es\):$")
HIT = re.compile(
    r"^  · seq=(?P<seq>-?\d+) score=(?P<score>\d\.\d\d) agent=(?P<agent>\S+) tool=(?P<tool>\S+) "
    r'ref=(?P<ref>e\d+)(?P<context>(?: \w+=(?:"[^"]*"|\S+))*) :: (?P<snippet>.*)$'
)
NO_MATCH = re.compile(r"^\[recall · (substring|keyword|semantic|hybrid)\] no relevant matches\.$")

SUBPROCESS_BOUND = 60.0
"""Seconds one korg-recall child may take: far above a query on a test ledger."""


# --- helpers ------------------------------------------------------------------------------------


def record(seq: int, tool: str = "Bash", **fields: Any) -> dict[str, Any]:
    """A legacy flat ledger record."""
    return {
        "seq": seq,
        "source_agent": fields.pop("agent", "agent:korgex@0.2.2"),
        "tool_name": tool,
        "args": fields.pop("args", {}),
        "result": fields.pop("result", {}),
        "success": fields.pop("success", True),
        **fields,
    }


def prompt(seq: int, text: str, **fields: Any) -> dict[str, Any]:
    return record(seq, "user_prompt", args={"prompt": text}, **fields)


def bash(seq: int, command: str, output: str = "", **fields: Any) -> dict[str, Any]:
    return record(seq, "Bash", args={"command": command}, result={"output": output}, **fields)


def write(path: Path, records: list[dict[str, Any]], mode: str = "w") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open(mode, encoding="utf-8") as handle:
        for item in records:
            handle.write(json.dumps(item) + "\n")
    return path


Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def index_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # These tests pin the keyword engine's output; with a model present `auto`
    # means hybrid, which tests/recall/test_semantic.py covers.
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    path = tmp_path / "cache" / "index.sqlite"
    monkeypatch.setenv("KORG_RECALL_INDEX", str(path))
    return path


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index_path: Path) -> Path:
    """A small legacy ledger, set as ``KORG_RECALL_LEDGER``."""
    path = write(
        tmp_path / "ledgers" / "s-1.jsonl",
        [
            prompt(
                1,
                "the postgres container is not ready when migrations start",
                timestamp="2026-05-01T09:00:00Z",
            ),
            bash(
                2, "docker compose up -d postgres", "Container db Started", timestamp="2026-05-01T09:00:05Z"
            ),
            bash(
                3,
                "pytest -q tests/test_invoice.py",
                "3 failed\nTypeError: bad\ninvoice total",
                timestamp="2026-05-02T10:00:00Z",
            ),
            record(
                4,
                "Read",
                args={"file_path": "src/rate_limiter.py"},
                result={"output": "class RateLimiter:\n    pass"},
                agent="agent:claude-code@2.1.0",
                timestamp="2026-05-03T10:00:00Z",
            ),
            record(
                5,
                "llm_inference",
                args={"model": "m"},
                result={"text": "The rate limiter drops requests at 100 rps."},
                agent="agent:claude-code@2.1.0",
                triggered_by=4,
                timestamp="2026-05-03T10:00:01Z",
            ),
        ],
    )
    monkeypatch.setenv("KORG_RECALL_LEDGER", str(path.parent))
    return path


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """``korg-recall ARGS`` in this process: (exit code, stdout, stderr)."""
    return functools.partial(call_recall, capsys)


def hits(out: str) -> list[dict[str, str]]:
    """The parsed hit lines of a recall answer (after checking its header)."""
    lines = out.splitlines()
    header = HEADER.match(lines[0])
    assert header, f"unexpected header: {lines[0]!r}"
    found = [HIT.match(line) for line in lines[1 : 1 + int(header.group(2))]]
    assert all(found), lines
    return [m.groupdict() for m in found if m]


def show(run: Run, *refs: str, context: int = 0, flags: tuple[str, ...] = ()) -> dict[str, Any]:
    argv = ["show", *[f"--ref={ref}" for ref in refs], "--context", str(context), *flags]
    code, out, err = run(*argv)
    assert code == 0, err
    answer: dict[str, Any] = json.loads(out)
    return answer


def sha256_tree(root: Path) -> dict[str, str]:
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()
    }


def spawn(args: list[str], env: Mapping[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "korg_bridge.recall.cli.app", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env={**os.environ, **env},
        cwd=REPO,
    )


def run_process(args: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    with spawn(args, env) as proc:
        out, err = proc.communicate(timeout=SUBPROCESS_BOUND)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


# --- recall output --------------------------------------------------------------------------------


def test_recall_prints_a_header_then_one_line_per_hit(ledger: Path, run: Run) -> None:
    code, out, err = run("recall", "--query", "postgres migrations")
    assert (code, err) == (0, "")
    found = hits(out)
    assert out.splitlines()[0] == f"[recall · keyword] {len(found)} match(es):"
    assert found[0]["seq"] == "1"
    assert found[0]["agent"] == "agent:korgex@0.2.2"
    assert found[0]["tool"] == "user_prompt"
    assert found[0]["snippet"] == "the postgres container is not ready when migrations start"
    assert float(found[0]["score"]) > 0


def test_snippets_are_one_line_of_at_most_200_characters(ledger: Path, run: Run) -> None:
    long_output = "\n".join(f"line {i}: invoice total mismatch for customer {i}" for i in range(200))
    write(ledger, [bash(6, "python report.py", long_output)], mode="a")
    code, out, _ = run("recall", "--query", "invoice", "--top-n", "10")
    assert code == 0
    snippets = [hit["snippet"] for hit in hits(out)]
    assert any("line 0" in s or "mismatch" in s for s in snippets)
    assert all(len(s) <= 200 for s in snippets)
    flattened = next(s for s in snippets if "TypeError" in s)
    assert "3 failed TypeError: bad invoice total" in flattened  # newlines became spaces


def test_no_match_prints_one_line(ledger: Path, run: Run) -> None:
    assert run("recall", "--query", "kubernetes") == (0, "[recall · keyword] no relevant matches.\n", "")


def test_substring_mode_names_itself_and_needs_every_term(ledger: Path, run: Run) -> None:
    code, out, _ = run("recall", "--query", "rate limiter", "--mode", "substring")
    assert code == 0
    found = hits(out)
    assert out.startswith("[recall · substring] ")
    assert {hit["seq"] for hit in found} == {"4", "5"}
    assert run("recall", "--query", "rate kubernetes", "--mode", "substring")[1] == (
        "[recall · substring] no relevant matches.\n"
    )


def test_json_output_carries_refs_sessions_and_scores(ledger: Path, run: Run) -> None:
    code, out, _ = run("recall", "--query", "docker compose", "--json")
    assert code == 0
    answer = json.loads(out)
    assert answer["mode"] == "keyword"
    top = answer["hits"][0]
    assert (top["seq"], top["tool"], top["session"]) == (2, "Bash", "s-1")
    assert re.fullmatch(r"e\d+", top["ref"])


# --- show, index, stats -----------------------------------------------------------------------------


def test_show_returns_the_full_event_of_a_ref_from_recall(ledger: Path, run: Run) -> None:
    ref = hits(run("recall", "--query", "pytest invoice")[1])[0]["ref"]
    answer = show(run, ref)
    [event] = answer["events"]
    assert event["ref"] == ref
    assert event["is_match"] is True
    assert event["args"] == {"command": "pytest -q tests/test_invoice.py"}
    assert event["result"] == {"output": "3 failed\nTypeError: bad\ninvoice total"}
    assert (event["seq"], event["shape"], event["session"]) == (3, "legacy", "s-1")
    assert event["source"] == str(ledger)
    assert answer["redacted"] == 0


def test_show_with_context_adds_the_neighbours_in_file_order(ledger: Path, run: Run) -> None:
    ref = hits(run("recall", "--query", "pytest invoice")[1])[0]["ref"]
    events = show(run, ref, context=1)["events"]
    assert [(e["seq"], e["is_match"]) for e in events] == [(2, False), (3, True), (4, False)]


def test_show_takes_several_refs(ledger: Path, run: Run) -> None:
    refs = [hit["ref"] for hit in hits(run("recall", "--query", "rate limiter")[1])]
    assert len(refs) == 2
    assert {e["seq"] for e in show(run, *refs)["events"]} == {4, 5}


def test_show_of_an_unknown_ref_is_a_one_line_usage_error(ledger: Path, run: Run) -> None:
    run("index")
    code, out, err = run("show", "--ref", "e999999")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert "e999999" in err


def test_index_reports_what_it_added_then_nothing_new(ledger: Path, index_path: Path, run: Run) -> None:
    code, out, _ = run("index")
    first = json.loads(out)
    assert code == 0
    assert first["index"] == str(index_path)
    assert (first["files_scanned"], first["files_changed"], first["events_added"]) == (1, 1, 5)
    assert first["skipped_lines"] == 0
    second = json.loads(run("index")[1])
    assert (second["files_changed"], second["events_added"]) == (0, 0)


def test_index_counts_malformed_lines_as_skipped(ledger: Path, run: Run) -> None:
    with ledger.open("a", encoding="utf-8") as handle:
        handle.write("{not json\n[1, 2]\n")
    assert json.loads(run("index")[1])["skipped_lines"] == 2


def test_stats_describes_the_index(ledger: Path, index_path: Path, run: Run) -> None:
    run("index")
    code, out, _ = run("stats")
    stats = json.loads(out)
    assert code == 0
    assert stats["index_path"] == str(index_path)
    assert stats["events"] == 5
    assert stats["by_shape"] == {"legacy": 5}
    assert stats["by_tool"]["Bash"] == 2
    assert stats["by_agent"] == {"agent:korgex@0.2.2": 3, "agent:claude-code@2.1.0": 2}
    assert [source["path"] for source in stats["sources"]] == [str(ledger)]
    assert stats["index_size_bytes"] > 0
    assert stats["last_refresh"] is not None


# --- verify -------------------------------------------------------------------------------------


def test_verify_reproduces_every_conformance_verdict(
    peers: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = peers / "ledgers" / "korg-ledger-v1"
    vectors = json.loads((folder / "conformance.json").read_text())["vectors"]
    assert len(vectors) >= 5
    for vector in vectors:
        if vector["key"]:
            monkeypatch.setenv("KORG_LEDGER_KEY", vector["key"])
        else:
            monkeypatch.delenv("KORG_LEDGER_KEY", raising=False)
        code, out, err = run("verify", "--path", str(folder / vector["file"]))
        report = json.loads(out)
        assert (code, err) == (0 if vector["verify"] == "intact" else 1, ""), vector["file"]
        assert report["intact"] is (vector["verify"] == "intact"), (vector["file"], report)
        if vector["verify"] == "intact":
            assert report["tip_entry_hash"] == vector["tip_entry_hash"]
            assert report["errors"] == []
        else:
            assert any(vector["error_contains"] in error for error in report["errors"]), report


def test_verify_without_the_key_finds_a_keyed_chain_not_intact(peers: Path, run: Run) -> None:
    code, out, _ = run("verify", "--path", str(peers / "ledgers" / "korg-ledger-v1" / "hmac-intact.jsonl"))
    assert code == 1
    assert json.loads(out)["intact"] is False


def test_verify_reads_envelope_sessions_intact_and_tampered(peers: Path, run: Run) -> None:
    sessions = peers / "ledgers" / "sessions"
    intact = json.loads(run("verify", "--path", str(sessions / "korg-envelope-session.jsonl"))[1])
    assert (intact["intact"], intact["events"], intact["errors"]) == (True, 6, [])
    code, out, _ = run("verify", "--path", str(sessions / "korg-envelope-tampered.jsonl"))
    tampered = json.loads(out)
    assert code == 1
    assert tampered["intact"] is False
    assert all(re.match(r"(seq|line) \d+: ", error) for error in tampered["errors"])


def test_verify_of_a_missing_file_is_one_line_and_exit_3(tmp_path: Path, run: Run) -> None:
    code, out, err = run("verify", "--path", str(tmp_path / "nope.jsonl"))
    assert (code, out) == (3, "")
    assert err.count("\n") == 1
    assert err.startswith("korg-recall: error: ledger not found")


def test_verify_of_a_folder_is_exit_3(tmp_path: Path, run: Run) -> None:
    code, _, err = run("verify", "--path", str(tmp_path))
    assert code == 3
    assert "directory" in err


# --- the four shapes, read through recall and show --------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "query", "seq", "agent", "tool", "shape"),
    [
        (
            "korg-ledger-v1/basic-intact.jsonl",
            "add a function",
            "1",
            "agent:conformance",
            "user_prompt",
            "journal",
        ),
        (
            "sessions/korg-envelope-session.jsonl",
            "subtraction bug",
            "1",
            "agent:claude-code@2.1.0",
            "user_prompt",
            "envelope",
        ),
        (
            "sessions/korg-envelope-session.jsonl",
            "edit math_utils",
            "4",
            "agent:claude-code@2.1.0",
            "Edit",
            "envelope",
        ),
        (
            "sessions/claude-code-transcript.jsonl",
            "list /tmp",
            "9",
            "claude-code#sess-1",
            "Bash",
            "claude-code",
        ),
        (
            "sessions/claude-code-transcript.jsonl",
            "tell me what's in it",
            "4",
            "claude-code#sess-1",
            "user_prompt",
            "claude-code",
        ),
        (
            "sessions/claude-stream-json-subagents.jsonl",
            "wc -l",
            "10",
            "claude-code#c32a3441",
            "Bash",
            "claude-code",
        ),
    ],
)
def test_peer_ledgers_of_every_shape_are_read_with_their_seq_agent_and_tool(
    peers: Path,
    run: Run,
    index_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    relative: str,
    query: str,
    seq: str,
    agent: str,
    tool: str,
    shape: str,
) -> None:
    monkeypatch.setenv("KORG_RECALL_LEDGER", str(peers / "ledgers" / relative))
    code, out, _ = run("recall", "--query", query, "--mode", "substring")
    assert code == 0
    top = hits(out)[0]
    assert (top["seq"], top["agent"], top["tool"]) == (seq, agent, tool)
    [event] = show(run, top["ref"])["events"]
    assert (event["seq"], event["agent"], event["tool"], event["shape"]) == (int(seq), agent, tool, shape)


def test_the_legacy_flat_shape_is_read_with_its_seq_agent_and_tool(ledger: Path, run: Run) -> None:
    top = hits(run("recall", "--query", "docker compose", "--mode", "substring")[1])[0]
    assert (top["seq"], top["agent"], top["tool"]) == ("2", "agent:korgex@0.2.2", "Bash")
    assert show(run, top["ref"])["events"][0]["shape"] == "legacy"


def test_a_claude_code_tool_result_is_joined_to_its_call(
    peers: Path, run: Run, index_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "KORG_RECALL_LEDGER", str(peers / "ledgers" / "sessions" / "claude-code-transcript.jsonl")
    )
    top = hits(run("recall", "--query", "hello world", "--tool-filter", "Read")[1])[0]
    [event] = show(run, top["ref"])["events"]
    assert event["args"] == {"file_path": "/tmp/foo"}
    assert event["result"] == {"output": "hello world"}


# --- the ledger changes between calls -----------------------------------------------------------------


def test_an_appended_event_is_found_by_the_next_recall(ledger: Path, run: Run) -> None:
    assert "no relevant matches" in run("recall", "--query", "zeppelin")[1]
    write(ledger, [prompt(6, "deploy the zeppelin service")], mode="a")
    top = hits(run("recall", "--query", "zeppelin")[1])
    assert [(hit["seq"], hit["tool"]) for hit in top] == [("6", "user_prompt")]


def test_a_truncated_ledger_is_read_again_from_the_start(ledger: Path, run: Run) -> None:
    assert hits(run("recall", "--query", "postgres")[1])
    write(ledger, [prompt(1, "a fresh start with kafka")])  # rewritten, shorter: truncated in place
    assert "no relevant matches" in run("recall", "--query", "postgres")[1]
    assert [hit["seq"] for hit in hits(run("recall", "--query", "kafka")[1])] == ["1"]
    assert json.loads(run("stats")[1])["events"] == 1


def test_a_new_file_in_a_watched_folder_is_picked_up(ledger: Path, run: Run) -> None:
    run("index")
    write(ledger.parent / "nested" / "s-2.jsonl", [prompt(1, "configure the grafana dashboard")])
    top = hits(run("recall", "--query", "grafana")[1])
    assert [hit["seq"] for hit in top] == ["1"]
    [event] = show(run, top[0]["ref"])["events"]
    assert event["session"] == "s-2"


def test_a_corrupt_index_is_rebuilt_with_a_warning_and_the_call_succeeds(
    ledger: Path, index_path: Path
) -> None:
    env = {"KORG_RECALL_INDEX": str(index_path), "KORG_RECALL_LEDGER": str(ledger)}
    assert run_process(["index"], env).returncode == 0
    built = index_path.read_bytes()
    index_path.write_bytes(built[:4096] + os.urandom(len(built) - 4096))  # its header says it is ours
    done = run_process(["recall", "--query", "postgres"], env)
    assert done.returncode == 0, done.stderr
    assert hits(done.stdout)[0]["seq"] == "1"
    assert "moving it aside and rebuilding" in done.stderr
    assert index_path.read_bytes()[:16] == b"SQLite format 3\x00"


def test_garbage_at_the_index_path_is_refused_and_left_untouched(
    ledger: Path, index_path: Path, run: Run
) -> None:
    run("index")
    index_path.write_bytes(b"\x00garbage" * 100)
    for suffix in ("-wal", "-shm"):
        Path(f"{index_path}{suffix}").unlink(missing_ok=True)
    code, out, err = run("recall", "--query", "docker")
    assert (code, out) == (3, "")
    assert "not a korg-recall index" in err
    assert "KORG_RECALL_INDEX" in err
    assert index_path.read_bytes() == b"\x00garbage" * 100


# --- queries that look like FTS5 syntax ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["keyword", "substring"])
@pytest.mark.parametrize(
    "query",
    [
        "postgres NOT container",
        "postgres OR",
        "NOT postgres",
        '"postgres',
        'postgres "container"',
        "postgres*",
        "args:postgres",
        "(postgres",
        "postgres)",
        "-postgres",
        "postgres -container",
        "AND",
        "NEAR(postgres container)",
        "^postgres",
        "'; DROP TABLE events; --",
        "*",
        '"',
    ],
)
def test_fts_syntax_in_a_query_never_errors(ledger: Path, run: Run, query: str, mode: str) -> None:
    code, out, err = run("recall", f"--query={query}", "--mode", mode)
    assert (code, err) == (0, "")
    first = out.splitlines()[0]
    assert HEADER.match(first) or NO_MATCH.match(first)


@pytest.mark.parametrize(
    "query", ["postgres NOT container", "NOT postgres", "-postgres", "postgres -container"]
)
def test_not_and_minus_are_words_not_exclusions(ledger: Path, run: Run, query: str) -> None:
    found = hits(run("recall", f"--query={query}")[1])
    assert "1" in {hit["seq"] for hit in found}  # the event has both words: an operator would drop it


def test_or_and_parentheses_are_words_not_grouping(ledger: Path, run: Run) -> None:
    plain = [hit["ref"] for hit in hits(run("recall", "--query", "postgres container")[1])]
    dressed = [hit["ref"] for hit in hits(run("recall", "--query", '(postgres OR "container")')[1])]
    assert dressed[: len(plain)] == plain


# --- secrets ------------------------------------------------------------------------------------------

SECRETS = {
    "anthropic": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "bearer": "Authorization: Bearer abcDEF1234567890ghiJKL",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "private-key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n-----END RSA PRIVATE KEY-----",
    "url-password": "postgres://admin:hunter2secret@db.internal:5432/app",
}
SHOWN = {
    "anthropic": "sk-ant-api03-AbCdEf",
    "bearer": "abcDEF1234567890ghiJKL",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIi",
    "private-key": "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo",
    "url-password": "hunter2secret",
}


@pytest.fixture
def secret_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index_path: Path) -> Path:
    path = write(
        tmp_path / "secrets" / "s-9.jsonl",
        [bash(i, f"echo credential {name}", SECRETS[name]) for i, name in enumerate(SECRETS, 1)],
    )
    monkeypatch.setenv("KORG_RECALL_LEDGER", str(path))
    return path


def test_secrets_are_redacted_and_counted(secret_ledger: Path, run: Run) -> None:
    code, out, _ = run("recall", "--query", "credential", "--top-n", "10")
    assert code == 0
    assert len(hits(out)) == len(SECRETS)
    for name, fragment in SHOWN.items():
        assert fragment not in out, name
    assert out.count("[redacted]") >= len(SECRETS)
    # The count, and no word on how to see them: recalled text must not learn the way.
    assert out.splitlines()[-1] == f"[recall] {len(SECRETS)} secret(s) redacted."


def test_allow_secrets_is_no_longer_an_argument(secret_ledger: Path, run: Run) -> None:
    code, out, err = run("recall", "--query", "credential", "--allow-secrets")
    assert (code, out) == (2, "")
    assert "--allow-secrets" in err
    assert all("allow_secrets" not in c["input_schema"]["properties"] for c in kit.document()["callables"])


def test_the_environment_variable_also_shows_secrets(
    secret_ledger: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KORG_RECALL_ALLOW_SECRETS", "1")
    out = run("recall", "--query", "credential", "--top-n", "10")[1]
    assert SHOWN["url-password"] in out
    assert "[redacted]" not in out


def test_show_redacts_too_unless_allowed(
    secret_ledger: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    refs = [hit["ref"] for hit in hits(run("recall", "--query", "credential", "--top-n", "10")[1])]
    hidden = show(run, *refs)
    text = json.dumps(hidden)
    assert hidden["redacted"] >= len(SECRETS)
    assert all(fragment not in text for fragment in SHOWN.values())
    monkeypatch.setenv("KORG_RECALL_ALLOW_SECRETS", "1")
    shown = show(run, *refs)
    assert shown["redacted"] == 0
    assert all(fragment in json.dumps(shown) for fragment in SHOWN.values())


def test_the_ledger_files_are_never_changed(
    secret_ledger: Path, ledger: Path, run: Run, monkeypatch: pytest.MonkeyPatch, peers: Path
) -> None:
    roots = [secret_ledger.parent, ledger.parent]
    monkeypatch.setenv("KORG_RECALL_LEDGER", os.pathsep.join(map(str, [*roots, peers / "ledgers"])))
    before = {root: sha256_tree(root) for root in [*roots, peers / "ledgers"]}
    refs = [hit["ref"] for hit in hits(run("recall", "--query", "credential postgres", "--top-n", "10")[1])]
    run("recall", "--query", "postgres", "--mode", "substring")
    show(run, *refs, context=2)
    run("index")
    run("stats")
    run("verify", "--path", str(secret_ledger))
    assert {root: sha256_tree(root) for root in before} == before


# --- filters ------------------------------------------------------------------------------------------


def test_tool_filter_keeps_only_those_tools(ledger: Path, run: Run) -> None:
    found = hits(run("recall", "--query", "postgres rate limiter invoice", "--tool-filter", "Read")[1])
    assert {hit["tool"] for hit in found} == {"Read"}
    found = hits(
        run(
            "recall",
            "--query",
            "postgres rate invoice",
            "--tool-filter",
            "Bash",
            "--tool-filter",
            "user_prompt",
        )[1]
    )
    assert {hit["tool"] for hit in found} == {"Bash", "user_prompt"}


def test_agent_filter_takes_a_prefix(ledger: Path, run: Run) -> None:
    found = hits(run("recall", "--query", "postgres rate limiter", "--agent-filter", "claude-code")[1])
    assert {hit["agent"] for hit in found} == {"agent:claude-code@2.1.0"}


def test_since_and_until_bound_the_time(ledger: Path, run: Run) -> None:
    query = ("recall", "--query", "postgres docker pytest rate limiter", "--top-n", "10")
    found = hits(run(*query, "--since", "2026-05-02", "--until", "2026-05-02")[1])
    assert [hit["seq"] for hit in found] == ["3"]
    assert {hit["seq"] for hit in hits(run(*query, "--since", "2026-05-03T00:00:00Z")[1])} == {"4", "5"}
    assert "no relevant matches" in run(*query, "--since", "1d")[1]


def test_ledger_flag_overrides_the_environment(ledger: Path, tmp_path: Path, run: Run) -> None:
    other = write(tmp_path / "other" / "o.jsonl", [prompt(1, "only in the other postgres ledger")])
    found = hits(run("recall", "--query", "postgres", "--ledger", str(other))[1])
    assert [hit["snippet"] for hit in found] == ["only in the other postgres ledger"]


def test_a_bad_since_is_a_one_line_usage_error(ledger: Path, run: Run) -> None:
    code, out, err = run("recall", "--query", "x", "--since", "last tuesday")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert err.startswith("korg-recall: error: invalid time 'last tuesday'")


def test_an_unknown_flag_is_a_one_line_usage_error(run: Run) -> None:
    code, _, err = run("recall", "--query", "x", "--colour")
    assert code == 2
    assert err.count("\n") == 1


# --- real processes -------------------------------------------------------------------------------------


def test_the_module_runs_as_a_program(ledger: Path, index_path: Path) -> None:
    env = {"KORG_RECALL_INDEX": str(index_path), "KORG_RECALL_LEDGER": str(ledger)}
    done = run_process(["recall", "--query", "rate limiter"], env)
    assert (done.returncode, done.stderr) == (0, "")
    assert {hit["seq"] for hit in hits(done.stdout)} == {"4", "5"}
    bad = run_process(["recall", "--query", "x", "--since", "soon"], env)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1
    assert run_process(["--version"], env).stdout.startswith("korg-recall ")


def _two_at_once(folder: Path, index_path: Path) -> None:
    env = {"KORG_RECALL_INDEX": str(index_path), "KORG_RECALL_LEDGER": str(folder)}
    procs = [spawn(["recall", "--query", "billing cron"], env) for _ in range(2)]
    results = []
    for proc in procs:
        with proc:
            results.append((proc.communicate(timeout=SUBPROCESS_BOUND), proc.returncode))
    for (out, err), code in results:
        assert code == 0, err
        assert len(hits(out)) == 5
    assert json.loads(run_process(["stats"], env).stdout)["events"] == len(list(folder.iterdir())) * 199


def _sessions(folder: Path, first: int, count: int) -> None:
    for n in range(first, first + count):
        write(
            folder / f"s-{n}.jsonl",
            [prompt(i, f"task {n}-{i} about the billing cron job") for i in range(1, 200)],
        )


def test_two_recall_processes_refreshing_one_index_at_once_both_succeed(
    tmp_path: Path, index_path: Path
) -> None:
    folder = tmp_path / "many"
    _sessions(folder, 0, 2)
    env = {"KORG_RECALL_INDEX": str(index_path), "KORG_RECALL_LEDGER": str(folder)}
    assert run_process(["index"], env).returncode == 0
    _sessions(folder, 2, 20)  # both processes find these new and race to index them
    _two_at_once(folder, index_path)


def test_two_recall_processes_creating_one_index_at_once_both_succeed(
    tmp_path: Path, index_path: Path
) -> None:
    folder = tmp_path / "many"
    _sessions(folder, 0, 20)
    _two_at_once(folder, index_path)


# --- the introspect contract ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return kit.document()


def test_introspect_validates_against_the_bridge_contract(document: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(contract_schema()).validate(document)
    parsed = parse_document(document, label="korg-recall")
    assert [(s.command_id, s.reason) for s in parsed.skipped] == [
        (name, "offered on the cli surface only")  # a person's act, never a tool
        for name in (
            "korg-recall.restore",
            "korg-recall.store.migrate",
            "korg-recall.export",
            "korg-recall.import",
            "korg-recall.hooks.install",
            "korg-recall.hooks.uninstall",
            "korg-recall.sync",
            "korg-recall.sync.init",
            "korg-recall.sync.status",
            "korg-recall.sync.config",
            "korg-recall.serve",
            "korg-recall.engine",
        )
    ]
    assert len(parsed.callables) == len(document["callables"]) - len(parsed.skipped) >= 5


def test_introspect_matches_the_snapshot(
    document: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--introspect"]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed) == document
    expected = json.loads(SNAPSHOT.read_text(encoding="utf-8")) if SNAPSHOT.exists() else {}
    if expected != document:
        before = {c["command_id"]: c for c in expected.get("callables", [])}
        after = {c["command_id"]: c for c in document["callables"]}
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        top = sorted(
            k
            for k in expected.keys() | document.keys()
            if k != "callables" and expected.get(k) != document.get(k)
        )
        pytest.fail(
            f"korg-recall --introspect differs from tests/recall/cli/introspect.snapshot.json "
            f"(callables changed: {', '.join(changed) or 'none'}; other fields: {', '.join(top) or 'none'}). "
            f"If the change is intended, regenerate the snapshot from the repository root with:\n    {REGENERATE}",
            pytrace=False,
        )


def test_every_callable_and_property_has_a_description(document: dict[str, Any]) -> None:
    for entry in document["callables"]:
        assert entry.get("description", "").strip(), entry["command_id"]
        for name, prop in entry["input_schema"].get("properties", {}).items():
            assert prop.get("description", "").strip(), f"{entry['command_id']}.{name}"


def _sample(name: str, schema: Mapping[str, Any]) -> Any:
    """A representative valid value for one property, as a model would send it."""
    if "enum" in schema:
        values = [v for v in schema["enum"] if v != schema.get("default")]
        return (values or schema["enum"])[0]
    kind = schema.get("type")
    if kind == "boolean":
        return True
    if kind == "integer":
        return max(int(schema.get("minimum", 0)), min(3, int(schema.get("maximum", 3))))
    if kind == "number":
        return (float(schema.get("minimum", 0.0)) + float(schema.get("maximum", 1.0))) / 2
    if kind == "array":
        if "enum" in schema.get("items", {}):
            return list(schema["items"]["enum"])
        item = _sample(name, schema.get("items", {}))
        return [item, f"{item}-2"] if isinstance(item, str) else [item]
    if kind == "object":
        props = schema.get("properties") or {}
        return {key: _sample(key, sub) for key, sub in props.items()} if props else {"key": 1}
    samples = {"since": "7d", "until": "2026-05-27T10:00:00Z", "path": "/tmp/ledger.jsonl", "ref": "e42"}
    return samples.get(name, f"{name} value with spaces")


def _cases() -> Iterator[tuple[str, str]]:
    for entry in kit.document()["callables"]:
        if entry.get("cli_only"):
            continue  # never passed by the bridge
        for name in entry["input_schema"].get("properties", {}):
            yield entry["command_id"], name


@pytest.mark.parametrize(("command_id", "prop"), list(_cases()))
def test_every_property_is_accepted_as_the_bridge_passes_it(
    document: dict[str, Any], command_id: str, prop: str
) -> None:
    parsed = parse_document(document, label="korg-recall")
    spec = parsed.get(command_id)
    assert spec is not None
    schema = spec.input_schema
    arguments = {name: _sample(name, schema["properties"][name]) for name in schema.get("required", [])}
    arguments[prop] = _sample(prop, schema["properties"][prop])
    argv = build_argv(parsed, spec, arguments, executable="korg-recall")
    command, args = kit.parse(argv[1:])
    assert command.command_id == command_id
    # A string-or-array property sent as one string comes back as a list of one: the same argv.
    if isinstance(arguments.get("ref"), str):
        arguments["ref"] = [arguments["ref"]]
    assert args == arguments


@pytest.mark.parametrize("value", ["-x", "--since=1d", "a=b", "", " spaced  out ", "NOT OR *"])
def test_awkward_query_strings_survive_the_bridge_argv(document: dict[str, Any], value: str) -> None:
    parsed = parse_document(document, label="korg-recall")
    argv = build_argv(parsed, "korg-recall.recall", {"query": value}, executable="korg-recall")
    assert kit.parse(argv[1:])[1] == {"query": value}

"""remember and revise in detail: keys, supersedes, metadata, listing order and budget --
through the real CLI entry point, in process."""

from __future__ import annotations

from pathlib import Path

import pytest

from korg_bridge.recall.memory import operations
from tests.helpers.cli import answer, call_recall
from tests.helpers.memory import rows


def remember(
    capsys: pytest.CaptureFixture[str], text: str, *flags: str, kind: str = "project"
) -> dict[str, object]:
    return answer(capsys, "remember", "--content", text, "--type", kind, *flags)


def test_a_key_makes_remember_an_upsert(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    first = remember(capsys, "Use pnpm.", "--key", "package-manager", kind="user")
    same = remember(capsys, "use pnpm", "--key", "package-manager", kind="user")
    assert (same["status"], same["id"], same["version"]) == ("exists", first["id"], 1)
    changed = remember(capsys, "Use bun.", "--key", "package-manager", kind="user")
    assert (changed["status"], changed["id"], changed["version"]) == ("superseded", first["id"], 2)
    assert rows(
        store, "SELECT version, body, superseded_by FROM memory WHERE id = ? ORDER BY version", [first["id"]]
    ) == [
        (1, "Use pnpm.", 2),
        (2, "Use bun.", None),
    ]


def test_supersedes_writes_a_new_version_of_that_memory(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    old = remember(capsys, "The API limit is 100 requests per minute.")
    new = remember(capsys, "The API limit is 250 requests per minute.", "--supersedes", str(old["id"]))
    assert (new["status"], new["id"], new["version"]) == ("superseded", old["id"], 2)
    code, _, err = call_recall(
        capsys, "remember", "--content", "x", "--type", "note", "--supersedes", "mzzzzzzzzzz"
    )
    assert code == 2 and "supersedes=mzzzzzzzzzz: no such memory" in err


def test_a_contradiction_is_linked_to_the_memory_it_resembles(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    old = remember(capsys, "Standup is at 09:30 in room Tulip.")
    new = remember(capsys, "Standup is at 10:00 in room Tulip.")
    assert new["status"] == "created"
    assert rows(store, "SELECT src, dst, kind FROM memory_links") == [(new["id"], old["id"], "similar")]
    links = answer(capsys, "memories", "--ids", str(new["id"]))["memories"][0]["links"]
    assert links == [{"src": new["id"], "dst": old["id"], "kind": "similar"}]


def test_a_merge_keeps_the_tags_and_provenance_of_both(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    first = remember(capsys, "Run make db before pytest in the shop repo.", "--tags", "db")
    merged = remember(
        capsys, "In the shop repo, run make db before running pytest.", "--tags", "tests", "--source", "e42"
    )
    assert merged["status"] == "merged"
    full = answer(capsys, "memories", "--ids", str(first["id"]))["memories"][0]
    assert full["tags"] == ["db", "tests"]
    assert [p["source"] for p in full["provenance"]] == [None, {"ref": "e42"}]
    assert full["reason"] == "merged near duplicate"


def test_revise_changes_metadata_and_keeps_a_chosen_title(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    made = remember(capsys, "Backups run nightly at 01:00.", "--title", "Backup schedule")
    revised = answer(
        capsys, "revise", "--id", str(made["id"]), "--content", "Backups run nightly at 03:00.",
        "--set", '{"pinned": true, "tags": ["ops"], "expires_at": "2099-01-01"}', "--reason", "moved after the batch",
    )  # fmt: skip
    assert revised["version"] == 2
    full = answer(capsys, "memories", "--ids", str(made["id"]))["memories"][0]
    assert (full["title"], full["pinned"], full["tags"], full["reason"]) == (
        "Backup schedule", True, ["ops"], "moved after the batch",
    )  # fmt: skip
    assert full["expires_at"] == "2099-01-01T00:00:00.000000Z"
    assert (
        answer(capsys, "revise", "--id", str(made["id"]), "--content", "Backups run nightly at 03:00.")[
            "status"
        ]
        == "unchanged"
    )


def test_revise_refuses_a_key_another_memory_holds(capsys: pytest.CaptureFixture[str], project: Path) -> None:
    remember(capsys, "Use pnpm.", "--key", "package-manager")
    other = remember(capsys, "Node 22 is required.")
    code, _, err = call_recall(
        capsys, "revise", "--id", str(other["id"]), "--set", '{"key": "package-manager"}'
    )
    assert code == 2 and "is held by" in err
    code, _, err = call_recall(capsys, "revise", "--id", str(other["id"]), "--set", '{"scope": "user"}')
    assert code == 2


def test_revising_a_retired_memory_restores_it(capsys: pytest.CaptureFixture[str], project: Path) -> None:
    made = remember(capsys, "The VPN profile is in 1Password.")
    answer(capsys, "forget", "--id", str(made["id"]))
    revised = answer(
        capsys, "revise", "--id", str(made["id"]), "--old-text", "1Password", "--new-text", "the vault"
    )
    assert (revised["state"], revised["version"]) == ("live", 2)
    assert any(str(made["id"]) in line for line in answer(capsys, "memories")["lines"])


def test_the_index_lists_pinned_first_then_newest_within_the_budget(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    pinned = remember(capsys, "Pinned: always run the formatter.", "--pinned", kind="feedback")
    for n in range(30):
        remember(capsys, f"Note {n}: the queue worker {n} handles topic t{n}.")
    page = answer(capsys, "memories", "--budget-tokens", "100")
    assert page["lines"][0].startswith(f"{pinned['id']} feedback ")
    assert page["lines"][0].endswith("[pinned]")
    assert page["lines"][1].split()[0] != pinned["id"]
    assert all(len(line) <= 150 for line in page["lines"])
    assert sum(len(line) // 4 + 1 for line in page["lines"]) <= 100
    seen = list(page["lines"])
    while page["next_cursor"] is not None:
        page = answer(capsys, "memories", "--budget-tokens", "100", "--cursor", page["next_cursor"])
        seen += page["lines"]
    assert len(seen) == len(set(seen)) == 31


def test_filters_and_retired_or_expired_memories_in_the_index(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    kept = remember(capsys, "Docs live at docs.example.", "--tags", "docs", kind="reference")
    gone = remember(capsys, "Old docs lived at wiki.example.", kind="reference")
    answer(capsys, "forget", "--id", str(gone["id"]))
    stale = remember(capsys, "Temporary banner until the sale ends.")
    answer(capsys, "revise", "--id", str(stale["id"]), "--set", '{"expires_at": "2000-01-01"}')
    ids = [line.split()[0] for line in answer(capsys, "memories")["lines"]]
    assert ids == [kept["id"]]
    everything = answer(capsys, "memories", "--include-retired")["lines"]
    assert any("[retired]" in line for line in everything) and any("[expired]" in line for line in everything)
    assert [line.split()[0] for line in answer(capsys, "memories", "--tag", "docs")["lines"]] == [kept["id"]]
    assert answer(capsys, "memories", "--type", "user")["lines"] == []


def test_past_the_soft_cap_remember_says_so_and_refuses_nothing(
    capsys: pytest.CaptureFixture[str], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operations, "SCOPE_SOFT_CAP", 2)
    for text in ("Alpha fact.", "Bravo fact."):
        assert "soft_cap" not in remember(capsys, text)["checks"]  # type: ignore[operator]
    third = remember(capsys, "Charlie fact.")
    assert third["status"] == "created"
    assert "above the soft cap of 2" in third["checks"]["soft_cap"]  # type: ignore[index]


def test_a_lower_case_name_swapped_in_a_long_sentence_is_never_merged(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    first = remember(capsys, "In the shop repo, install dependencies with npm and commit the lockfile.")
    other = remember(capsys, "Install dependencies with pnpm and commit the lockfile in the shop repo.")
    assert other["status"] == "created" and other["id"] != first["id"]
    assert any(d.startswith("words differ (pnpm / npm)") for d in other["similar"][0]["differs"])


def test_a_new_value_of_a_fact_in_other_words_is_linked_and_recalled_first(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    old = remember(capsys, "Billing-api listens on port 8080.")
    new = remember(capsys, "We moved billing-api to port 9090 last week.")
    assert new["status"] == "created"
    assert [s["id"] for s in new["similar"]] == [old["id"]]  # overlap below 0.35, but only a value moved
    assert rows(store, "SELECT src, dst FROM memory_links") == [(new["id"], old["id"])]
    code, out, _ = call_recall(
        capsys, "recall", "--query", "which port does billing-api listen on", "--kinds", "memory"
    )
    assert code == 0 and out.index(str(new["id"])) < out.index(str(old["id"]))
    assert f'older_than="{new["id"]}"' in out

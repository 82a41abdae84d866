"""forget in detail: the two-step by query (expiry, changes in between, too many matches),
repeated and impossible forgets, and files a person made that a purge must not delete."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from korg_bridge.recall.memory import forget, search
from tests.helpers.cli import answer, call_recall, run_recall
from tests.helpers.memory import PgTarget, holds, log_entries, rows


def remember(capsys: pytest.CaptureFixture[str], text: str) -> str:
    return str(answer(capsys, "remember", "--content", text, "--type", "project")["id"])


def test_a_query_without_matches_changes_nothing(capsys: pytest.CaptureFixture[str], project: Path) -> None:
    remember(capsys, "Pelicans migrate in autumn.")
    assert answer(capsys, "forget", "--query", "flamingo")["status"] == "no_match"


def test_every_query_word_must_match(capsys: pytest.CaptureFixture[str], project: Path) -> None:
    remember(capsys, "Pelicans migrate in autumn.")
    remember(capsys, "Pelicans nest on islands.")
    asked = answer(capsys, "forget", "--query", "pelicans autumn")
    assert [m["title"] for m in asked["matches"]] == ["Pelicans migrate in autumn."]


def test_a_memory_changed_between_the_two_steps_stops_the_second(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    memory_id = remember(capsys, "Pelicans migrate in autumn.")
    asked = answer(capsys, "forget", "--query", "pelicans", "--mode", "purge")
    answer(capsys, "revise", "--id", memory_id, "--old-text", "autumn", "--new-text", "late autumn")
    again = answer(capsys, "forget", "--query", "pelicans", "--mode", "purge", "--confirm", asked["confirm"])
    assert again["status"] == "changed"
    assert again["matches"][0]["version"] == 2 and again["confirm"] != asked["confirm"]
    assert rows(store, "SELECT count(*) FROM memory WHERE state = 'purged'") == [(0,)]
    done = answer(capsys, "forget", "--query", "pelicans", "--mode", "purge", "--confirm", again["confirm"])
    assert (done["status"], done["ids"]) == ("purged", [memory_id])


@pytest.mark.parametrize("token", ["1.0123456789abcdef0123456789abcdef", "garbage", ""])
def test_an_expired_or_malformed_token_acts_on_nothing(
    capsys: pytest.CaptureFixture[str], project: Path, token: str
) -> None:
    remember(capsys, "Pelicans migrate in autumn.")
    result = answer(capsys, "forget", "--query", "pelicans", f"--confirm={token}")
    assert result["status"] == ("confirm" if not token else "expired")
    assert any("Pelicans" in line for line in answer(capsys, "memories")["lines"])


def test_too_many_matches_must_be_narrowed_first(
    capsys: pytest.CaptureFixture[str], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "FORGET_MAX", 2)
    monkeypatch.setattr(forget, "FORGET_MAX", 2)
    for place in ("lakes", "rivers", "coasts"):
        remember(capsys, f"Pelicans live on {place}.")
    result = answer(capsys, "forget", "--query", "pelicans")
    assert result["status"] == "too_many" and len(result["matches"]) == 2 and "confirm" not in result


def test_forgetting_twice_is_unchanged_and_a_purged_memory_cannot_be_retired(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    memory_id = remember(capsys, "Pelicans migrate in autumn.")
    assert answer(capsys, "forget", "--id", memory_id)["status"] == "retired"
    assert answer(capsys, "forget", "--id", memory_id)["status"] == "unchanged"
    assert answer(capsys, "forget", "--id", memory_id, "--mode", "purge")["status"] == "purged"
    assert answer(capsys, "forget", "--id", memory_id, "--mode", "purge")["status"] == "unchanged"
    code, _, err = call_recall(capsys, "forget", "--id", memory_id)
    assert code == 2 and "purged already" in err
    code, _, err = call_recall(capsys, "restore", "--id", memory_id)
    assert code == 2 and "was purged" in err
    code, _, err = call_recall(capsys, "forget", "--id", memory_id, "--confirm", "x")
    assert code == 2 and "confirm goes with query" in err


@pytest.mark.sqlite_only("a file the user made in the Markdown mirror, which a team store has not")
def test_a_purge_leaves_a_file_the_user_made_and_says_so(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    remember(capsys, "Something first, so the folders exist.")
    folder = next((store.parent / "memories" / "project").iterdir())
    mine = folder / "herons.md"
    mine.write_text("Herons fish at dawn.\n")
    line = next(line for line in answer(capsys, "memories")["lines"] if "Herons" in line)
    result = answer(capsys, "forget", "--id", line.split()[0], "--mode", "purge")
    assert result["files_you_made"] == [str(mine)]
    assert mine.read_text() == "Herons fish at dawn.\n"
    answer(capsys, "memories")  # the kept file is not taken in again as a new memory
    assert not any("Herons" in line for line in answer(capsys, "memories")["lines"])


def test_a_purge_leaves_no_byte_of_title_body_tags_key_or_slug_anywhere_korg_recall_writes(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path | PgTarget, isolated_env: Path
) -> None:
    made = answer(
        capsys, "remember", "--content", "Quokka rounds: twice daily at the west enclosure.", "--type", "project",
        "--title", "Quokka feeding plan", "--tags", "marsupialtag", "--key", "quokkakey",
    )  # fmt: skip
    memory_id = str(made["id"])
    if isinstance(store, Path):  # a hand edit of the mirror file: logged as a mirror_edit
        path = next((store.parent / "memories").rglob(f"*--{memory_id}.md"))
        assert "quokka-feeding-plan" in path.name
        path.write_text(path.read_text().replace("twice daily", "thrice daily"))
        answer(capsys, "memories")
        assert [e["tool_name"] for e in log_entries(store)][-1] == "memory.mirror_edit"
    answer(
        capsys, "revise", "--id", memory_id, "--content", "Quokka rounds: thrice daily, west enclosure gate."
    )
    history = run_recall("recall", "--query", memory_id, "--kinds", "history", "--json", cwd=project)
    assert history.returncode == 0, history.stderr  # the history index, built from the log
    if isinstance(store, Path):
        assert json.loads(history.stdout)["hits"], "the log was not indexed"
    done = answer(capsys, "forget", "--id", memory_id, "--mode", "purge")
    assert done["status"] == "purged"
    needles = ("Quokka", "quokka", "rounds", "enclosure", "marsupialtag", "quokkakey", "feeding-plan")
    for needle in needles:
        assert not holds(store, needle), needle
    if isinstance(store, Path):
        written = b"".join(
            p.as_posix().encode() + (p.read_bytes() if p.is_file() else b"")
            for folder in (store.parent, isolated_env / ".cache")
            for p in folder.rglob("*")
            if p.is_file() or p.is_dir()
        )
        for needle in needles:
            assert needle.encode() not in written, needle

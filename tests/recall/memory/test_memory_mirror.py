"""The Markdown mirror: files people can read and edit; hand edits become versions, never lost;
files people made are taken in and never rewritten; a deleted file comes back."""

from __future__ import annotations

from pathlib import Path

import pytest

from korg_bridge.recall.memory.mirror import FrontMatterError, parse, render
from korg_bridge.recall.memory.records import Version

from ._memory import answer, call, rows

pytestmark = pytest.mark.sqlite_only(
    "the Markdown mirror is a folder of files beside a SQLite store; a team store has none "
    "(test_memory_pg.py checks that it stays off)"
)


def mirror_of(store: Path) -> Path:
    return store.parent / "memories"


def file_of(store: Path, memory_id: str) -> Path:
    found = list(mirror_of(store).rglob(f"*--{memory_id}.md"))
    assert len(found) == 1, found
    return found[0]


def remember(capsys: pytest.CaptureFixture[str], text: str, *flags: str) -> dict[str, object]:
    return answer(capsys, "remember", "--content", text, "--type", "project", *flags)


def versions(store: Path, memory_id: str) -> list[tuple[int, str, str, str | None, int]]:
    return [
        (v, actor, body, reason, conflict)
        for v, actor, body, reason, conflict in rows(
            store,
            "SELECT version, actor, body, reason, conflict FROM memory WHERE id = ? ORDER BY version",
            [memory_id],
        )
    ]


def test_a_memory_is_mirrored_as_markdown_with_front_matter(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    made = remember(
        capsys,
        "Run `make db` before `pytest`: the fixtures expect a migrated database.",
        "--title",
        "Tests need make db first",
        "--tags",
        "db",
        "--tags",
        "tests",
    )
    path = file_of(store, str(made["id"]))
    assert path.parent.parent.name == "project"
    assert path.parent.name.startswith("shop-")
    assert path.name == f"project_tests-need-make-db-first--{made['id']}.md"
    text = path.read_text()
    assert text.startswith(
        f'---\nid: {made["id"]}\ntype: project\nscope: "project:{project.resolve()}"\nversion: 1\ntags: [db, tests]\nupdated: '
    )
    assert "\ntitle: Tests need make db first\n---\nRun `make db` before `pytest`" in text


def test_a_hand_edit_becomes_a_new_version_by_the_user(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    made = remember(capsys, "The staging database is reset every Monday.")
    path = file_of(store, str(made["id"]))
    path.write_text(path.read_text().replace("every Monday", "every Sunday night"))
    listed = answer(capsys, "memories")
    assert any("every Sunday night" in line for line in listed["lines"])
    assert [(v, actor, reason) for v, actor, _, reason, _ in versions(store, str(made["id"]))] == [
        (1, "agent", None),
        (2, "user", "mirror edit"),
    ]
    assert "version: 2\n" in file_of(store, str(made["id"])).read_text()
    log = (store.parent / "memory-ops.jsonl").read_text()
    assert '"tool_name": "memory.mirror_edit"' in log


def test_an_edit_that_raced_a_newer_write_is_kept_as_its_own_flagged_version(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    made = remember(capsys, "Releases are cut from the main branch.")
    memory_id = str(made["id"])
    path = file_of(store, memory_id)
    opened_in_editor = path.read_text()  # version 1
    answer(capsys, "revise", "--id", memory_id, "--content", "Releases are cut from release branches.")
    assert "version: 2\n" in path.read_text()
    path.write_text(opened_in_editor.replace("main branch", "main branch after the QA sign-off"))
    answer(capsys, "memories")
    history = versions(store, memory_id)
    assert [(v, actor, reason, conflict) for v, actor, _, reason, conflict in history] == [
        (1, "agent", None, 0),
        (2, "agent", "revised", 0),
        (3, "user", "mirror edit (conflict)", 1),
    ]
    assert history[1][2] == "Releases are cut from release branches."  # neither text is lost
    assert history[2][2] == "Releases are cut from the main branch after the QA sign-off."
    assert any("[conflict]" in line for line in answer(capsys, "memories")["lines"])
    assert answer(capsys, "memories", "--stats")["conflicts"] == 1


def test_a_hand_made_file_is_imported_and_never_rewritten(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    remember(capsys, "Something first, so the folders exist.")
    folder = next((mirror_of(store) / "project").iterdir())
    mine = folder / "my-notes.md"
    mine.write_text(
        "---\ntitle: Payments\ntype: reference\ntags: [stripe]\n---\nStripe webhooks hit /hooks/stripe.\n"
    )
    original = mine.read_bytes()
    listed = answer(capsys, "memories")
    line = next(line for line in listed["lines"] if "Payments" in line)
    memory_id = line.split()[0]
    stored = rows(store, "SELECT type, actor, body, tags FROM memory WHERE id = ?", [memory_id])
    assert stored == [("reference", "user", "Stripe webhooks hit /hooks/stripe.", '["stripe"]')]
    answer(capsys, "revise", "--id", memory_id, "--content", "Stripe webhooks hit /hooks/stripe/v2.")
    answer(capsys, "memories")
    assert mine.read_bytes() == original
    assert list(folder.glob(f"*--{memory_id}.md")) == []  # no second file for it either
    mine.write_text(original.decode().replace("/hooks/stripe.", "/webhooks/stripe."))
    answer(capsys, "memories")
    assert rows(
        store, "SELECT body, actor FROM memory WHERE id = ? AND superseded_by IS NULL", [memory_id]
    ) == [("Stripe webhooks hit /webhooks/stripe.", "user")]


def test_an_unparseable_file_is_left_alone_and_reported(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, project: Path, store: Path
) -> None:
    remember(capsys, "Something first, so the folders exist.")
    folder = next((mirror_of(store) / "project").iterdir())
    broken = folder / "broken.md"
    broken.write_text("---\ntitle: no closing line\nthis is not yaml\n")
    original = broken.read_bytes()
    code, out, _ = call(capsys, "memories")
    assert code == 0
    assert "broken.md" in out  # mirror_problems
    assert "broken.md" in caplog.text  # and a warning (on stderr in a real process)
    assert broken.read_bytes() == original
    assert str(broken) in answer(capsys, "memories", "--stats")["mirror"]["unparseable"]


def test_a_deleted_mirror_file_is_written_again(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    made = remember(capsys, "Feature flags live in config/flags.yml.")
    path = file_of(store, str(made["id"]))
    path.unlink()
    answer(capsys, "memories")
    assert file_of(store, str(made["id"])) == path


def test_retiring_removes_the_file_and_restoring_brings_it_back(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    made = remember(capsys, "Nightly jobs run at 02:00 UTC.")
    path = file_of(store, str(made["id"]))
    answer(capsys, "forget", "--id", str(made["id"]))
    assert not path.exists()
    answer(capsys, "restore", "--id", str(made["id"]))
    assert "version: 2\n" in file_of(store, str(made["id"])).read_text()


def test_with_the_mirror_off_no_file_is_written(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KORG_RECALL_MIRROR", "0")
    made = remember(capsys, "No files for this one.")
    assert made["checks"]["mirror"] == "off"  # type: ignore[index]
    assert not mirror_of(store).exists()


def test_render_and_parse_agree_on_awkward_titles_and_tags() -> None:
    version = Version(
        id="mabcdefghij",
        version=3,
        scope="project:/home/ana/src/shop",
        type="note",
        title='Colons: "quotes", # hashes and true',
        body="Body line one.\n\nBody line three.",
        content_hash="x",
        actor="agent",
        recorded_at="2026-12-01T10:04:05.123456Z",
        tags=["a b", "yes", "3.10", "c,d"],
    )
    parsed = parse(render(version))
    assert parsed.meta["title"] == version.title
    assert parsed.meta["tags"] == version.tags
    assert parsed.meta["version"] == 3
    assert parsed.meta["updated"] == "2026-12-01T10:04:05Z"
    assert parsed.body == version.body


@pytest.mark.parametrize(
    "text",
    [
        "---\ntitle: x\n",
        "---\ntags: [a, b\n---\nbody",
        "---\n: no key\n---\nbody",
        '---\ntitle: "open\n---\nbody',
    ],
)
def test_front_matter_that_cannot_be_read_is_an_error(text: str) -> None:
    with pytest.raises(FrontMatterError):
        parse(text)


def test_block_lists_and_files_without_front_matter_are_read() -> None:
    assert parse("---\ntags:\n  - a\n  - b\n---\nbody\n").meta["tags"] == ["a", "b"]
    plain = parse("Just a note.\n")
    assert (plain.meta, plain.body, plain.has_front_matter) == ({}, "Just a note.", False)

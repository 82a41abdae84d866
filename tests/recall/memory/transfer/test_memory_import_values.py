"""Whatever an import file carries, the store keeps only strict JSON and text both stores can hold,
so no imported value can break a later read (issue #19, item 3): every reader is run, as a real
process, over a store holding every such value -- and over one an older korg-recall poisoned."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.recall.memory.storable import MAX_DEPTH, MAX_STORED_DEPTH
from tests.helpers.cli import answer, call_recall, ok, run_recall
from tests.helpers.memory import PgTarget, dump, rows

NESTED_OK = "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1)
"""As deep as metadata may nest: inside the metadata object, MAX_DEPTH levels in all."""
HOSTILE_JSON = {
    "nan": "NaN",
    "infinity": "Infinity",
    "minus_infinity": "-Infinity",
    "too_big_for_a_double": "1e999",
    "beyond_64_bits": "1" + "0" * 40,
    "beyond_what_python_converts": "9" * 5000,
    "lone_surrogate": '"a\\ud800b"',
    "lone_low_surrogate": '"\\udfff"',
    "nul": '"a\\u0000b"',
    "controls": '"\\u0001\\u001b[31mred\\u007f\\u009b\\u202e"',
    "nested": NESTED_OK,
    "long": '"' + "x" * 100_000 + '"',
    "\\ud83d key": "1",
}
"""Values a JSON file can hold, as the JSON text a file holds them in (no Python value spells NaN)."""
HOSTILE_TEXT = "The deploy bot \\ud83d reads \\u0000 and \\u001b[31m colours \\u009b \\u202e here"
"""A memory's text with a lone surrogate, a NUL and terminal controls, as JSON string content."""


def hostile_object() -> str:
    return "{" + ", ".join(f'"{name}": {value}' for name, value in HOSTILE_JSON.items()) + "}"


def mem0_file(path: Path) -> Path:
    entries = [
        f'{{"id": "h1", "memory": "{HOSTILE_TEXT} one", "categories": ["a\\ud800", "b\\u0000", 7, NaN], '
        f'"metadata": {hostile_object()}, "created_at": NaN, "user_id": {"9" * 30}}}',
        f'{{"id": {"1" * 5000}, "memory": "Second \\udfff memory with \\u0000 inside", "metadata": {{"x": [NaN, Infinity]}}}}',
        '{"id": "h3", "memory": "Third memory", "metadata": {"type": "project", "score": -Infinity}}',
    ]
    path.write_text('{"results": [' + ", ".join(entries) + "]}", encoding="utf-8")
    return path


def mcp_file(path: Path) -> Path:
    lines = [
        '{"type": "entity", "name": "Ana\\ud800", "entityType": "person\\u0000", '
        f'"observations": ["{HOSTILE_TEXT}", "plain"]}}',
        '{"type": "entity", "name": "Shop", "entityType": "service", "observations": ["Sells \\u0000 things"]}',
        '{"type": "relation", "from": "Ana\\ud800", "to": "Shop", "relationType": "runs\\u001b[0m"}',
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def markdown_file(path: Path) -> Path:
    path.write_bytes(
        b'---\ntitle: "Odd \\ud800 title \\u0000"\ntags: ["t\\udfff", "\\u0000"]\ntype: project\n---\n'
        b"A body with a NUL \x00 byte and \x1b[31mcolour\x1b[0m.\n"
    )
    return path


def our_export(path: Path) -> Path:
    """A hand-made export carrying the values in every JSON column and in its text."""
    header = '{"format": "korg-recall-memory@v1", "versions": 1, "links": 0}'
    version = (
        '{"record": "version", "id": "mhandmade22", "version": 1, "scope": "user", "type": "note", '
        f'"title": "Hand \\ud800 made", "body": "{HOSTILE_TEXT} export", "key": null, '
        '"content_hash": "0", "tags": ["x\\ud800", "y\\u0000"], "pinned": false, "state": "live", '
        '"trust": "trusted", "actor": "user", "valid_from": null, "valid_to": null, '
        '"recorded_at": "2026-01-02T03:04:05.000000Z", "retired_at": null, "superseded_by": null, '
        '"superseded_at": null, "expires_at": null, "use_count": 0, "last_used_at": null, '
        f'"source": {hostile_object()}, "provenance": [{{"actor": "user", "at": NaN, "source": {hostile_object()}}}], '
        '"reason": null, "conflict": false}'
    )
    path.write_text(header + "\n" + version + "\n", encoding="utf-8")
    return path


def strict(text: str) -> Any:
    """``text`` as JSON, refusing what the stores' JSON functions refuse."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"not strict JSON: {name}")

    value = json.loads(text, parse_constant=refuse)
    text.encode("utf-8")  # no lone surrogate
    assert "\\u0000" not in text
    return value


def stored_json_is_strict(store: Path | PgTarget) -> None:
    for table_row in rows(store, "SELECT tags, source, provenance, title, body FROM memory"):
        for column in table_row[:3]:
            if column is not None:
                strict(column)
        for text in table_row[3:]:
            assert "\x00" not in text
            text.encode("utf-8")  # no lone surrogate
    if isinstance(store, PgTarget):  # what jsonb accepts: the casts the listing uses
        assert store.rows(
            "SELECT count(*) FROM memory WHERE source IS NOT NULL AND (source::jsonb) IS NULL"
        ) == [(0,)]
        assert store.rows("SELECT count(*) FROM memory WHERE (provenance::jsonb) IS NULL") == [(0,)]
    else:
        conn = sqlite3.connect(store)
        try:
            bad = conn.execute(
                "SELECT count(*) FROM memory WHERE json_valid(tags) = 0 OR json_valid(provenance) = 0 "
                "OR (source IS NOT NULL AND json_valid(source) = 0)"
            ).fetchone()[0]
        finally:
            conn.close()
        assert bad == 0


def every_reader_survives(project: Path, store: Path | PgTarget, tmp_path: Path) -> None:
    """Each reader of the store, as a real process, succeeds and prints strict JSON."""
    listing = ok(run_recall("memories", "--scope", "user", "--include-retired", cwd=project))
    ok(run_recall("memories", cwd=project))
    ids = sorted({line.split()[0] for line in listing["lines"]})
    assert ids
    flags = [flag for memory_id in ids[:20] for flag in ("--ids", memory_id)]
    full = ok(run_recall("memories", "--scope", "user", *flags, cwd=project))
    assert json.dumps(full)
    ok(run_recall("memories", "--stats", cwd=project))
    for flags in (["--kinds", "memory", "--scope", "user"], [], ["--json"]):
        found = run_recall("recall", "--query", "memory deploy", *flags, cwd=project)
        assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["memories"]
    context = run_recall("context", cwd=project)
    assert context.returncode == 0, context.stderr
    stats = run_recall("stats", cwd=project)
    assert stats.returncode == 0, stats.stderr
    exported = run_recall("export", cwd=project)
    assert exported.returncode == 0, exported.stderr
    lines = [strict(line) for line in exported.stdout.splitlines()]
    assert lines[0]["versions"] == len(lines) - 1 - lines[0]["links"]
    export_file = tmp_path / f"again-{len(list(tmp_path.iterdir()))}.jsonl"
    export_file.write_text(exported.stdout, encoding="utf-8")
    again = ok(run_recall("import", str(export_file), cwd=project))  # into the store it came from
    assert (again["new"], again["conflict"]) == (0, 0)
    elsewhere = tmp_path / f"elsewhere-{len(list(tmp_path.iterdir()))}" / "memory.sqlite"
    moved = ok(run_recall("import", str(export_file), cwd=project, env={"KORG_RECALL_STORE": str(elsewhere)}))
    assert moved["versions"] == lines[0]["versions"]
    ok(run_recall("memories", "--scope", "user", cwd=project, env={"KORG_RECALL_STORE": str(elsewhere)}))
    flags = (
        ["--store", store.url]
        if isinstance(store, PgTarget)
        else ["--path", str(store.parent / "memory-ops.jsonl")]
    )
    assert ok(run_recall("verify", *flags, cwd=project))["intact"] is True
    if isinstance(store, Path):  # the operation log is a history source: its events can be shown
        hits = ok(
            run_recall("recall", "--kinds", "history", "--query", "memory import", "--json", cwd=project)
        )
        refs = [hit["ref"] for hit in hits.get("hits", []) if "ref" in hit]
        if refs:
            ok(run_recall("show", refs[0], cwd=project))


def test_every_reader_survives_every_value_an_import_can_carry(
    project: Path, store: Path | PgTarget, tmp_path: Path
) -> None:
    sources = tmp_path / "sources"
    sources.mkdir()
    for made in (
        mem0_file(sources / "mem0.json"),
        mcp_file(sources / "memory.jsonl"),
        markdown_file(sources / "odd.md"),
        our_export(sources / "export.jsonl"),
    ):
        flags = [] if made.name == "export.jsonl" else ["--scope", "user"]
        report = ok(run_recall("import", str(made), *flags, cwd=project))
        assert report["status"] == "imported"
    stored_json_is_strict(store)
    bodies = [body for (body,) in rows(store, "SELECT body FROM memory")]
    assert any("\ufffd" in body for body in bodies)  # lone surrogates and NULs became U+FFFD
    assert not any("\x00" in body for body in bodies)
    source = json.loads(rows(store, "SELECT source FROM memory WHERE body LIKE '%one'")[0][0])
    metadata = source["metadata"]
    assert (metadata["nan"], metadata["infinity"], metadata["too_big_for_a_double"]) == (
        "NaN",
        "Infinity",
        "1e999",
    )
    assert metadata["beyond_64_bits"] == "1" + "0" * 40
    assert metadata["beyond_what_python_converts"].startswith("9" * 1000)  # digits, cut as long strings are
    assert len(json.dumps(source)) < 20_000  # the long string was cut, with a marker
    every_reader_survives(project, store, tmp_path)


def test_a_store_an_older_korg_recall_poisoned_is_read_by_every_reader(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path | PgTarget, tmp_path: Path
) -> None:
    answer(
        capsys, "remember", "--content", "Deploys need two approvals.", "--type", "project", "--scope", "user"
    )
    poison = (
        '{"metadata": {"score": NaN, "big": Infinity}, "identity": "mem0:x", "kind": "x"}',
        '[{"actor": "import", "at": NaN, "source": null}]',
    )
    sql = "UPDATE memory SET source = ?, provenance = ?"
    if isinstance(store, PgTarget):
        assert store.as_owner(sql, poison) == 1
    else:
        conn = sqlite3.connect(store)
        with conn:
            conn.execute(sql, poison)
        conn.close()
    every_reader_survives(project, store, tmp_path)
    mem0 = tmp_path / "m.json"
    mem0.write_text('[{"id": "x", "memory": "Another fact altogether"}]', encoding="utf-8")
    assert answer(capsys, "import", str(mem0))["created"] == 1


def test_metadata_nested_deeper_than_the_stores_keep_is_refused_naming_the_file_and_item(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path | PgTarget, tmp_path: Path
) -> None:
    answer(
        capsys, "remember", "--content", "Deploys need two approvals.", "--type", "project", "--scope", "user"
    )
    before = dump(store)
    deep = "[" * (MAX_DEPTH + 1) + "1" + "]" * (MAX_DEPTH + 1)
    path = tmp_path / "mem0.json"
    path.write_text(
        f'[{{"memory": "fine"}}, {{"memory": "deep one", "metadata": {{"m": {deep}}}}}]', encoding="utf-8"
    )
    code, out, err = call_recall(capsys, "import", str(path))
    assert (code, out) == (2, "")
    assert f"{path} item 2: its metadata is nested {MAX_DEPTH + 2} levels deep" in err
    assert len(err.strip().splitlines()) == 1
    deeper = "[" * 100_000 + "]" * 100_000  # beyond what a decoder follows
    path.write_text(f'[{{"memory": "x", "metadata": {deeper}}}]', encoding="utf-8")
    code, _, err = call_recall(capsys, "import", str(path))
    assert code == 2 and "nested too deeply to read" in err and "Traceback" not in err
    exported = tmp_path / "e.jsonl"
    our_export(exported)
    deepest = "[" * MAX_STORED_DEPTH + "1" + "]" * MAX_STORED_DEPTH
    text = exported.read_text(encoding="utf-8").replace(
        '"provenance": [', f'"provenance": [{{"deep": {deepest}}}, ', 1
    )
    exported.write_text(text, encoding="utf-8")
    code, _, err = call_recall(capsys, "import", str(exported))
    assert code == 2 and f"{exported} line 2: provenance is nested" in err
    assert dump(store) == before


def test_a_number_too_long_to_read_in_front_matter_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path | PgTarget, tmp_path: Path
) -> None:
    path = tmp_path / "n.md"
    path.write_text("---\npinned: " + "9" * 5000 + "\n---\nA body.\n", encoding="utf-8")
    code, out, err = call_recall(capsys, "import", str(path))
    assert (code, out) == (2, "")
    assert f"{path}: unreadable front matter (a number too long to read)" in err


@pytest.mark.parametrize(
    ("field", "value"),
    [("version", 2**31), ("use_count", 2**40), ("superseded_by", 10**30)],
)
def test_an_export_integer_beyond_what_the_stores_hold_names_the_line_and_field(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    store: Path | PgTarget,
    tmp_path: Path,
    field: str,
    value: int,
) -> None:
    exported = tmp_path / "e.jsonl"
    our_export(exported)
    header, line = exported.read_text(encoding="utf-8").splitlines()
    line = line.replace(
        f'"{field}": ' + ("1" if field == "version" else "0" if field == "use_count" else "null"),
        f'"{field}": {value}',
        1,
    )
    exported.write_text(header + "\n" + line + "\n", encoding="utf-8")
    code, _, err = call_recall(capsys, "import", str(exported))
    assert code == 2 and f"{exported} line 2: {field} is not an integer" in err

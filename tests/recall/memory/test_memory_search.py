"""Memory retrieval (the API recall builds on): heads by default, older versions on request,
what held at a past time, decay that ranks without hiding, scopes that never leak, similar
memories ranked newest first -- and forget's stricter matching."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from korg_bridge.recall.memory.backend.pg.fulltext import ranked_sql as pg_ranked_sql
from korg_bridge.recall.memory.backend.protocols import Tx
from korg_bridge.recall.memory.backend.sqlite.fulltext import ranked_sql
from korg_bridge.recall.memory.records import Version, iso, parse_iso
from korg_bridge.recall.memory.rows import add_link, insert_version
from korg_bridge.recall.memory.search import forget_matches, match_where, search_memories
from tests.helpers.memory import PgTarget, opened

NOW = parse_iso("2026-06-01T12:00:00Z")
DAY = 86_400.0
SHOP = "project:/src/shop"
BLOG = "project:/src/blog"


@pytest.fixture
def conn(store: Path | PgTarget) -> Iterator[Tx]:
    """One write transaction on this test's store (a SQLite file, or a tenant of the team store): the
    rows are put and searched inside it."""
    with opened(store) as handle, handle.write() as tx:
        yield tx


def put(conn: Tx, memory_id: str, body: str, *, days_ago: float = 1, **fields: object) -> Version:
    values: dict[str, object] = {
        "id": memory_id,
        "version": 1,
        "scope": SHOP,
        "type": "project",
        "title": body[:40],
        "body": body,
        "content_hash": memory_id,
        "actor": "agent",
        "recorded_at": iso(NOW - days_ago * DAY),
    }
    values.update(fields)
    return insert_version(conn, Version(**values))  # type: ignore[arg-type]


def ids(hits: list[object]) -> list[tuple[str, int]]:
    return [(h.version.id, h.version.version) for h in hits]  # type: ignore[attr-defined]


def test_heads_only_by_default_and_older_versions_on_request(conn: Tx) -> None:
    put(
        conn,
        "maaaaaaaaaa",
        "The database is MySQL 5.7.",
        days_ago=30,
        superseded_by=2,
        superseded_at=iso(NOW - 2 * DAY),
    )
    put(conn, "maaaaaaaaaa", "The database is Postgres 16.", version=2, days_ago=2)
    hits = search_memories(conn, "database", scopes=[SHOP], now=NOW)
    assert ids(hits) == [("maaaaaaaaaa", 2)]
    assert set(hits[0].breakdown) == {"bm25", "vector", "recency", "pinned", "decay", "total"}
    both = search_memories(conn, "database", scopes=[SHOP], include_superseded=True, now=NOW)
    assert ids(both) == [("maaaaaaaaaa", 2), ("maaaaaaaaaa", 1)]
    assert [h.current for h in both] == [True, False]
    assert 'superseded="true"' in both[1].render(NOW)


def test_as_of_answers_with_what_held_then(conn: Tx) -> None:
    put(
        conn,
        "maaaaaaaaaa",
        "The database is MySQL 5.7.",
        days_ago=30,
        superseded_by=2,
        superseded_at=iso(NOW - 2 * DAY),
    )
    put(conn, "maaaaaaaaaa", "The database is Postgres 16.", version=2, days_ago=2)
    then = search_memories(conn, "mysql", scopes=[SHOP], as_of=NOW - 10 * DAY, now=NOW)
    assert ids(then) == [("maaaaaaaaaa", 1)]
    assert then[0].current is False
    later = search_memories(conn, "mysql", scopes=[SHOP], as_of=NOW - DAY, now=NOW)
    assert ids(later) == [("maaaaaaaaaa", 2)]  # the lineage matched; it held version 2 by then
    before = search_memories(conn, "mysql", scopes=[SHOP], as_of=NOW - 40 * DAY, now=NOW)
    assert before == []


def test_as_of_honours_validity_and_retirement(conn: Tx) -> None:
    put(
        conn,
        "mbbbbbbbbbb",
        "Code freeze for the launch.",
        days_ago=20,
        valid_from=iso(NOW - 10 * DAY),
        valid_to=iso(NOW - 5 * DAY),
    )
    assert search_memories(conn, "freeze", scopes=[SHOP], as_of=NOW - 15 * DAY, now=NOW) == []
    assert ids(search_memories(conn, "freeze", scopes=[SHOP], as_of=NOW - 7 * DAY, now=NOW)) == [
        ("mbbbbbbbbbb", 1)
    ]
    assert search_memories(conn, "freeze", scopes=[SHOP], as_of=NOW - 3 * DAY, now=NOW) == []
    put(
        conn,
        "mcccccccccc",
        "Vendor portal password rotates monthly.",
        days_ago=20,
        state="retired",
        retired_at=iso(NOW - 4 * DAY),
    )
    assert ids(search_memories(conn, "vendor portal", scopes=[SHOP], as_of=NOW - 6 * DAY, now=NOW)) == [
        ("mcccccccccc", 1)
    ]
    assert search_memories(conn, "vendor portal", scopes=[SHOP], as_of=NOW - 3 * DAY, now=NOW) == []


def test_retired_pending_expired_and_other_scopes_are_not_found(conn: Tx) -> None:
    put(conn, "maaaaaaaaaa", "Kiwi retired fact.", state="retired", retired_at=iso(NOW - DAY))
    put(conn, "mbbbbbbbbbb", "Kiwi pending fact.", state="pending")
    put(conn, "mcccccccccc", "Kiwi expired fact.", expires_at=iso(NOW - 1))
    put(conn, "mdddddddddd", "Kiwi fact of the blog.", scope=BLOG)
    put(conn, "meeeeeeeeee", "Kiwi fact of the shop.")
    put(conn, "mffffffffff", "Kiwi fact of the user.", scope="user", type="user")
    assert sorted(ids(search_memories(conn, "kiwi", scopes=["user", SHOP], now=NOW))) == [
        ("meeeeeeeeee", 1),
        ("mffffffffff", 1),
    ]


def test_decay_ranks_older_memories_lower_but_never_hides_them(conn: Tx) -> None:
    put(conn, "maaaaaaaaaa", "Heron sightings are logged in the wiki.", days_ago=400)
    put(conn, "mbbbbbbbbbb", "Heron sightings are logged in the sheet.", days_ago=1)
    put(conn, "mcccccccccc", "Heron sightings are logged in the book.", days_ago=400, pinned=True)
    hits = search_memories(conn, "heron sightings", scopes=[SHOP], now=NOW)
    by_id = {h.version.id: h for h in hits}
    assert 0.8 <= by_id["maaaaaaaaaa"].breakdown["decay"] < 0.85  # near the floor, never zero
    assert by_id["mcccccccccc"].breakdown["decay"] == 1.0  # pinned
    assert ids(hits)[-1] == ("maaaaaaaaaa", 1)


def test_of_memories_matching_the_same_words_the_newest_ranks_first(conn: Tx) -> None:
    put(conn, "maaaaaaaaaa", "The kestrel camera streams on port 8080 from the roof.", days_ago=60)
    put(conn, "mbbbbbbbbbb", "Kestrel camera: port 9090 now.", days_ago=3)
    put(conn, "mcccccccccc", "The kestrel nest box was cleaned.", days_ago=1)
    hits = search_memories(conn, "kestrel camera port", scopes=[SHOP], now=NOW)
    assert ids(hits)[0] == ("mbbbbbbbbbb", 1)  # same words matched, a shorter older text aside
    assert ids(hits)[-1] == ("mcccccccccc", 1)  # newest of all, but it matches less


def test_a_similar_link_between_two_different_things_does_not_reorder_them(conn: Tx) -> None:
    put(conn, "maaaaaaaaaa", "The project pins Rust version 1.75 and Rust nightly for docs.", days_ago=30)
    put(conn, "mbbbbbbbbbb", "The project pins Redis version 7.2.", days_ago=2)
    add_link(conn, "mbbbbbbbbbb", "maaaaaaaaaa", "similar", iso(NOW))
    hits = search_memories(conn, "rust version", scopes=[SHOP], now=NOW)
    assert ids(hits) == [("maaaaaaaaaa", 1), ("mbbbbbbbbbb", 1)]
    assert hits[0].older_than is None


def test_being_recalled_often_does_not_lift_a_memory_above_an_equal_one(conn: Tx) -> None:
    put(conn, "maaaaaaaaaa", "Ferret cages are cleaned on Fridays.", use_count=10_000)
    put(conn, "mbbbbbbbbbb", "Ferret cages are cleaned on Fridays.", use_count=0)
    first, second = search_memories(conn, "ferret cages", scopes=[SHOP], now=NOW)
    assert first.score == second.score and first.breakdown == second.breakdown
    assert "use" not in first.breakdown


def test_of_two_similar_memories_the_newer_ranks_first_and_the_older_is_marked(
    conn: Tx,
) -> None:
    put(conn, "maaaaaaaaaa", "Otter tank otter filter otter is replaced monthly.", days_ago=5)
    put(conn, "mbbbbbbbbbb", "The otter filter is replaced weekly.", days_ago=1)
    add_link(conn, "mbbbbbbbbbb", "maaaaaaaaaa", "similar", iso(NOW))
    hits = search_memories(conn, "otter", scopes=[SHOP], now=NOW)
    assert ids(hits) == [("mbbbbbbbbbb", 1), ("maaaaaaaaaa", 1)]
    assert hits[1].older_than == "mbbbbbbbbbb"
    assert 'older_than="mbbbbbbbbbb"' in hits[1].render(NOW)


def test_query_syntax_is_searched_as_words(conn: Tx) -> None:
    put(conn, "maaaaaaaaaa", "NOT a problem: the OR gate works.")
    assert ids(search_memories(conn, 'NOT "OR" gate*', scopes=[SHOP], now=NOW)) == [("maaaaaaaaaa", 1)]
    where = match_where(2, 1, heads_only=True)
    assert "MATCH ?" in ranked_sql(where) and "gate" not in ranked_sql(where)
    team = pg_ranked_sql(3, where)  # the words are bound parameters there too
    assert team.count("phraseto_tsquery") == 3 and "gate" not in team


def test_forget_matches_need_every_word_and_see_old_text_only_when_purging(conn: Tx) -> None:
    put(conn, "maaaaaaaaaa", "Alice's phone number is 555-0100.", superseded_by=2, superseded_at=iso(NOW))
    put(conn, "maaaaaaaaaa", "Alice changed her contact details.", version=2)
    put(conn, "mbbbbbbbbbb", "Alice likes tea.")
    assert [v.id for v in forget_matches(conn, "alice phone", [SHOP], "retire")] == []
    assert [(v.id, v.version) for v in forget_matches(conn, "alice phone", [SHOP], "purge")] == [
        ("maaaaaaaaaa", 2)
    ]
    assert [v.id for v in forget_matches(conn, "alice", [SHOP], "retire")] == ["maaaaaaaaaa", "mbbbbbbbbbb"]
    assert forget_matches(conn, "alice", [BLOG], "purge") == []


def test_a_revision_worded_differently_is_still_found_by_what_its_fact_is_about(
    conn: Tx,
) -> None:
    # The first version says "version"; the revision says "release". A question about the version
    # finds the lineage by its older wording and shows its head, above a newer memory that only
    # names the same subject.
    put(
        conn,
        "mkafkaaaaaa",
        "The project pins Kafka version 3.5.",
        days_ago=60,
        superseded_by=2,
        superseded_at=iso(NOW - 20 * DAY),
    )
    put(
        conn, "mkafkaaaaaa", "Builds run on Kafka release 3.8 now.", days_ago=20, version=2, content_hash="k2"
    )
    put(conn, "mdocsaaaaaa", "Kafka docs are on the wiki.", days_ago=5)
    for n, subject in enumerate(("Redis", "Django", "Terraform", "React", "Go", "Rust", "Node")):
        put(conn, f"mfiller{n}aaa", f"{subject} settings live in config/{subject.lower()}.toml.", days_ago=9)
    hits = search_memories(conn, "Which Kafka version are we on?", scopes=[SHOP], now=NOW)
    assert ids(hits)[0] == ("mkafkaaaaaa", 2)
    assert all(hit.current for hit in hits)

"""User text reaches FTS5 only through quoting; every search's SQL is checked here as text."""

from __future__ import annotations

import pytest

from korg_bridge.recall.history.query.fts import (
    SELECTIVE_MAX_DF,
    Filters,
    details_sql,
    filter_sql,
    keyword_sql,
    like_pattern,
    older_selective_sql,
    outside_sources_sql,
    query_terms,
    quote_fts,
    selective_sql,
    substring_sql,
)
from tests.helpers.sqlite import connect

NASTY = [
    "foo NOT bar",
    "foo OR bar",
    "foo AND bar",
    'say "hello',
    'unbalanced " quote "',
    "prefix*",
    "*",
    "col:val",
    "text:secret",
    "(grouped",
    "closing)",
    "-x",
    "^start",
    "NEAR(a b, 2)",
    "a + b",
    "{text}: x",
    "'single'",
    "\\back\\slash",
    "ünïcödé ÆØÅ 日本語",
    "",
    "   ",
    "!!! ??? ---",
]


def test_each_term_is_quoted_and_terms_are_or_ed() -> None:
    assert quote_fts("rate limiter") == '"rate" OR "limiter"'


def test_operators_and_column_filters_become_plain_quoted_words() -> None:
    assert quote_fts("foo NOT bar") == '"foo" OR "not" OR "bar"'
    assert quote_fts("col:val -x ^y prefix*") == '"col:val" OR "-x" OR "^y" OR "prefix*"'


def test_inner_quotes_are_doubled() -> None:
    assert quote_fts('say "hello') == '"say" OR """hello"'


def test_punctuation_only_or_empty_query_quotes_to_nothing() -> None:
    assert quote_fts("") == ""
    assert quote_fts('* - " ( )') == ""


def test_stopwords_are_dropped_unless_nothing_else_is_left() -> None:
    assert query_terms("how did we fix the rate limiter") == ["fix", "rate", "limiter"]
    assert query_terms("the who") == ["the", "who"]
    assert query_terms("the who", drop_stopwords=False) == ["the", "who"]


def test_terms_are_lower_cased_and_distinct() -> None:
    assert query_terms("Foo foo FOO bar") == ["foo", "bar"]


@pytest.mark.parametrize("query", NASTY)
def test_quoted_query_is_always_valid_fts5(query: str) -> None:
    conn = connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61 remove_diacritics 2')")
    conn.execute("INSERT INTO t (text) VALUES ('foo not bar col val prefix secret hello')")
    match = quote_fts(query)
    if match:
        conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (match,)).fetchall()


def test_filter_sql_scopes_to_sources_by_exact_path_or_folder_prefix() -> None:
    where, params = filter_sql(Filters(sources=["/home/u/.korg/sessions", "/tmp/one.jsonl"]))
    assert where == (
        "e.source_id IN (SELECT id FROM sources WHERE path = ? OR substr(path, 1, ?) = ?"
        " OR path = ? OR substr(path, 1, ?) = ?)"
    )
    assert params == [
        "/home/u/.korg/sessions",
        len("/home/u/.korg/sessions/"),
        "/home/u/.korg/sessions/",
        "/tmp/one.jsonl",
        len("/tmp/one.jsonl/"),
        "/tmp/one.jsonl/",
    ]


def test_filter_sql_without_sources_matches_nothing() -> None:
    assert filter_sql(Filters()) == ("0", [])


def test_filter_sql_with_unrestricted_sources_and_nothing_else_is_empty() -> None:
    assert filter_sql(Filters(sources=None)) == ("", [])


def test_outside_sources_sql_finds_a_file_the_call_does_not_cover() -> None:
    sql, params = outside_sources_sql(["/l"])
    assert sql == "SELECT path FROM sources WHERE NOT (path = ? OR substr(path, 1, ?) = ?) LIMIT 1"
    assert params == ["/l", 3, "/l/"]
    conn = connect(":memory:")
    conn.execute("CREATE TABLE sources (path TEXT)")
    conn.executemany("INSERT INTO sources VALUES (?)", [("/l/a.jsonl",), ("/l",), ("/lx/b.jsonl",)])
    assert conn.execute(sql, params).fetchall() == [("/lx/b.jsonl",)]


def test_filter_sql_adds_tools_agents_and_time_bounds() -> None:
    where, params = filter_sql(
        Filters(sources=["/l"], tools=["Read", "Bash"], agents=["claude-code"], since=10.0, until=20.0)
    )
    assert where.endswith(
        " AND e.tool IN (?, ?)"
        " AND (substr(e.agent, 1, ?) = ? OR substr(e.agent, 1, ?) = ?)"
        " AND e.ts >= ? AND e.ts <= ?"
    )
    assert params[3:] == ["Read", "Bash", 11, "claude-code", 17, "agent:claude-code", 10.0, 20.0]


def test_agent_already_prefixed_is_not_prefixed_twice() -> None:
    where, params = filter_sql(Filters(sources=["/l"], agents=["agent:x"]))
    assert where.endswith("AND (substr(e.agent, 1, ?) = ?)")
    assert params[3:] == [7, "agent:x"]


def test_keyword_sql_ranks_by_bm25_with_a_limit() -> None:
    sql, params = keyword_sql('"foo"', Filters(sources=["/l"]), limit=50, offset=100)
    assert sql == (
        "SELECT e.id, bm25(events_fts) AS rank\n"
        "FROM events_fts JOIN events e ON e.id = events_fts.rowid\n"
        "WHERE events_fts MATCH ? AND e.source_id IN (SELECT id FROM sources WHERE path = ?"
        " OR substr(path, 1, ?) = ?)\n"
        "ORDER BY rank\n"
        "LIMIT ? OFFSET ?"
    )
    assert params == ['"foo"', "/l", 3, "/l/", 50, 100]


def test_keyword_sql_without_filters_does_not_join_events() -> None:
    sql, params = keyword_sql('"foo"', Filters(sources=None), limit=5)
    assert sql == (
        "SELECT rowid, bm25(events_fts) AS rank\n"
        "FROM events_fts\n"
        "WHERE events_fts MATCH ?\n"
        "ORDER BY rank\n"
        "LIMIT ? OFFSET ?"
    )
    assert params == ['"foo"', 5, 0]


def test_keyword_sql_window_is_a_rowid_range() -> None:
    sql, params = keyword_sql('"common"', Filters(sources=None), limit=5, min_rowid=900)
    assert "WHERE events_fts MATCH ? AND events_fts.rowid >= ?\n" in sql
    assert params == ['"common"', 900, 5, 0]


def test_older_selective_sql_scores_both_expressions_below_the_window() -> None:
    (both, both_params), (own, own_params) = older_selective_sql(
        '"common" OR "rare"', '"rare"', Filters(sources=None, tools=["Bash"]), below=900
    )
    assert both == (
        "SELECT e.id, bm25(events_fts) AS rank\n"
        "FROM events_fts JOIN events e ON e.id = events_fts.rowid\n"
        "WHERE events_fts MATCH ? AND events_fts.rowid < ? AND e.tool IN (?)"
    )
    assert both_params == ['("rare") AND ("common" OR "rare")', 900, "Bash"]
    assert own == both
    assert own_params == ['"rare"', 900, "Bash"]


def test_selective_sql_quotes_the_term_and_stops_counting_past_the_limit() -> None:
    sql, params = selective_sql('X"y')
    assert sql == "SELECT count(*) <= ? FROM (SELECT rowid FROM events_fts WHERE events_fts MATCH ? LIMIT ?)"
    assert params == [SELECTIVE_MAX_DF, '"x""y"', SELECTIVE_MAX_DF + 1]


def test_substring_sql_without_filters_or_ascii_terms_scans_everything() -> None:
    sql, params = substring_sql(["über"], Filters(sources=None), length_cap=1000)
    assert "WHERE 1\n" in sql
    assert params == [1000]


def test_substring_sql_likes_ascii_terms_and_orders_shortest_first() -> None:
    sql, params = substring_sql(["foo", "über", "50%"], Filters(sources=["/l"]), length_cap=1000)
    assert sql == (
        "SELECT e.id\n"
        "FROM events e\n"
        "WHERE (e.text LIKE ? ESCAPE '\\' OR e.body LIKE ? ESCAPE '\\')"
        " AND (e.text LIKE ? ESCAPE '\\' OR e.body LIKE ? ESCAPE '\\')"
        " AND e.source_id IN (SELECT id FROM sources WHERE path = ? OR substr(path, 1, ?) = ?)\n"
        "ORDER BY min(length(e.text) + coalesce(length(e.body), 0), ?), e.id"
    )
    assert params == ["%foo%", "%foo%", "%50\\%%", "%50\\%%", "/l", 3, "/l/", 1000]


def test_like_pattern_makes_wildcards_literal() -> None:
    assert like_pattern("a_b%c\\d") == "%a\\_b\\%c\\\\d%"
    conn = connect(":memory:")
    rows = conn.execute(
        "SELECT x FROM (SELECT 'a_b' AS x UNION SELECT 'axb') WHERE x LIKE ? ESCAPE '\\'",
        (like_pattern("a_b"),),
    ).fetchall()
    assert rows == [("a_b",)]


def test_details_sql_has_one_placeholder_per_id() -> None:
    assert details_sql(3) == (
        "SELECT e.id, e.seq, e.agent, e.tool, e.session, e.timestamp, e.text, e.body, e.project, e.extra,"
        " s.gone_at IS NOT NULL\n"
        "FROM events e JOIN sources s ON s.id = e.source_id WHERE e.id IN (?, ?, ?)"
    )


def test_project_filter_matches_the_root_and_folders_under_it_only() -> None:
    where, params = filter_sql(Filters(sources=None, project="/w/app"))
    assert where == "(e.project = ? OR substr(e.project, 1, ?) = ?)"
    assert params == ["/w/app", 7, "/w/app/"]
    conn = connect(":memory:")
    conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, project TEXT)")
    conn.executemany(
        "INSERT INTO events (project) VALUES (?)", [("/w/app",), ("/w/app/assets",), ("/w/app2",), (None,)]
    )
    rows = conn.execute(f"SELECT project FROM events e WHERE {where} ORDER BY id", params).fetchall()
    assert rows == [("/w/app",), ("/w/app/assets",)]

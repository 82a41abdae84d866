"""The write policy's text comparisons: exact repeats hash alike; rewordings overlap; the guard
finds every kind of difference a merge must not paper over."""

from __future__ import annotations

import pytest

from korg_bridge.recall.memory.normalize import (
    clip_title,
    content_hash,
    differences,
    jaccard,
    normalise,
    title_of,
    word_set,
)

pytestmark = pytest.mark.no_store


def test_an_exact_repeat_hashes_alike_however_spaced_cased_or_punctuated() -> None:
    assert content_hash("Run make db before pytest.") == content_hash("  run MAKE db\n before   pytest ")
    assert content_hash("Run make db before pytest.") != content_hash("Run make db after pytest.")
    assert normalise(
        "\uff26\uff55\uff4c\uff4c\uff57\uff49\uff44\uff54\uff48!!"
    )  # fullwidth letters == "fullwidth"


def test_word_sets_drop_stop_words_and_meet_on_stems() -> None:
    assert word_set("The tests are running") == word_set("test runs")
    assert (
        jaccard(word_set("tests need make db"), word_set("the tests need make db first")) == 0.75
    )  # "need" carries no fact
    assert "not" in word_set("do not push")


@pytest.mark.parametrize(
    ("a", "b", "kind"),
    [
        (
            "The API allows 100 requests per minute.",
            "The API allows 250 requests per minute.",
            "numbers differ",
        ),
        ("We support Python 3.10 and later.", "We support Python 3.11 and later.", "numbers differ"),
        ("The service listens on port 8080.", "The service listens on port 8443.", "numbers differ"),
        ("The freeze starts on 2026-06-01.", "The freeze starts on 2026-07-15.", "dates or times differ"),
        ("The freeze starts on March 3.", "The freeze starts on April 3.", "dates or times differ"),
        ("Standup is on Monday.", "Standup is on Tuesday.", "dates or times differ"),
        (
            "Use the staging database for tests.",
            "Never use the staging database for tests.",
            "negation differs",
        ),
        ("Tests can run in parallel.", "Tests can't run in parallel.", "negation differs"),
        ("Use pnpm instead of npm.", "Use pnpm and npm.", "negation differs"),
        ("Deploys go through GitHub Actions.", "Deploys go through Buildkite.", "names differ"),
        ("Config lives in `settings.toml`.", "Config lives in `settings.yaml`.", "names differ"),
        ("Logs go to /var/log/shop.", "Logs go to /var/log/blog.", "names differ"),
        ("Ask Maria about billing.", "Ask Priya about billing.", "names differ"),
        ("The user prefers pnpm over npm.", "The user prefers npm over pnpm.", "order differs"),
        ("Migrate from MySQL to Postgres.", "Migrate from Postgres to MySQL.", "order differs"),
        (
            "Install dependencies with npm in the shop repo.",
            "Install dependencies with pnpm in the shop repo.",
            "words differ (npm / pnpm)",
        ),
        (
            "Run make db before pytest in the shop repo.",
            "Run make db before pytest in the blog repo.",
            "words differ",
        ),
        (
            "Dev owns the checkout on-call rotation.",
            "Keiko owns the checkout on-call rotation.",
            "words differ",
        ),
    ],
)
def test_the_guard_names_what_two_similar_texts_disagree_on(a: str, b: str, kind: str) -> None:
    found = differences(a, b)
    assert any(item.startswith(kind) for item in found), found


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "Run make db before pytest in the shop repo.",
            "In the shop repo, run make db before running pytest.",
        ),
        ("Never use npm here.", "Do not use npm here."),
        ("Postgres needs the pg_trgm extension.", "We need the pg_trgm extension for Postgres."),
        ("The user prefers pnpm.", "the user prefers pnpm"),
        ("The user prefers pnpm as the package manager.", "For package management the user prefers pnpm."),
        ("Dev owns the checkout rotation.", "The owner of the checkout rotation is Dev."),
        ("The freeze starts in March.", "In March the freeze starts."),
    ],
)
def test_rewordings_of_one_fact_show_no_difference(a: str, b: str) -> None:
    assert differences(a, b) == []


def test_titles_are_one_line_of_at_most_80_characters() -> None:
    assert title_of("\n\n# Heading here\nbody") == "Heading here"
    long = clip_title("word " * 40)
    assert len(long) <= 80 and long.endswith("…")

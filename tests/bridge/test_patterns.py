"""Schema patterns on bounded engines: RE2 where it can, ``regex`` with a timeout where not."""

from __future__ import annotations

import time

import pytest

from korg_bridge.bridge.patterns import MAX_REPEAT, check_pattern, compile_pattern
from korg_bridge.errors import DocumentError


@pytest.mark.parametrize(
    ("source", "engine"),
    [
        ("^[a-z]+$", "re2"),
        ("^(a+)+$", "re2"),
        (r"^\u00e9+$", "re2"),
        ("(?<name>x)", "re2"),
        ("^(?=a)a$", "regex"),
        (r"^(a)\1$", "regex"),
        ("a{1001}", "regex"),
        (r"^a\Z", "regex"),
    ],
)
def test_each_pattern_goes_to_the_linear_engine_unless_it_needs_the_fallback(
    source: str, engine: str
) -> None:
    assert compile_pattern(source).engine == engine


@pytest.mark.parametrize("source", ["^abc$", "^(?=a)abc$"])
def test_dollar_means_the_end_of_the_text_in_both_engines(source: str) -> None:
    pattern = compile_pattern(source)
    assert pattern.search("abc", 1.0)
    assert not pattern.search("abc\n", 1.0)


def test_a_dollar_inside_a_class_or_escaped_stays_a_character() -> None:
    assert compile_pattern(r"^a[$]\$(?=x)").search("a$$x", 1.0)


def test_unicode_escapes_match_the_character_they_name() -> None:
    assert compile_pattern(r"^caf\u00e9$").search("café", 1.0)
    assert compile_pattern(r"^caf\u00e9(?!x)$").search("café", 1.0)


def test_a_lone_surrogate_in_the_text_does_not_break_the_linear_engine() -> None:
    assert compile_pattern("^a.b$").search("a\ud800b", 1.0)


def test_a_catastrophic_backtracking_search_stops_at_its_timeout() -> None:
    pattern = compile_pattern("^(a|aa)+(?=b)")
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        pattern.search("a" * 40 + "!", 0.2)
    assert time.monotonic() - started < 30  # a hang guard, not a speed claim


@pytest.mark.parametrize(
    ("source", "phrase"),
    [
        ("a{99999999999}", "repeats 99,999,999,999 times"),
        ("(a{1000}){1000}", "repeats 1,000,000 times"),
        ("(", "is not a valid regular expression"),
        ("a**", "is not a valid regular expression"),
    ],
)
def test_patterns_no_engine_can_use_safely_are_refused_with_the_reason(source: str, phrase: str) -> None:
    with pytest.raises(DocumentError) as info:
        compile_pattern(source)
    assert phrase in info.value.message


def test_nested_counted_repeats_within_the_bound_compile() -> None:
    assert compile_pattern("(a{100}){100}").engine == "regex"
    assert MAX_REPEAT == 10_000


def test_the_regex_format_accepts_non_strings_and_refuses_bad_patterns() -> None:
    assert check_pattern(5) and check_pattern("^a+$")
    with pytest.raises(DocumentError):
        check_pattern("(" * 3000)

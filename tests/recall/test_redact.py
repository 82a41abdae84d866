"""Redaction: secrets in recalled text become ``[redacted]``; hashes, ids and words do not.

The fake secrets are assembled from pieces so no secret scanner mistakes
this file for a leak.
"""

from __future__ import annotations

import pytest

from korg_bridge.recall.redact import REDACTED, redact, redact_value

ALNUM = "aB3dE5fG7hJ9kL2mN4pQ6rS8tU0vW1xY3zA5bC7dE9"

SECRETS = {
    "anthropic": "sk-" + "ant-api03-" + ALNUM + "-_xyzXYZ0123456789AA",
    "openai": "sk-" + ALNUM[:48],
    "openai-project": "sk-" + "proj-" + ALNUM + "_" + ALNUM[:20],
    "github-classic": "ghp" + "_" + ALNUM[:36],
    "github-oauth": "gho" + "_" + ALNUM[:36],
    "github-server": "ghs" + "_" + ALNUM[:36],
    "github-fine-grained": "github" + "_pat_" + "11ABCDEFG0" + ALNUM[:12] + "_" + ALNUM[:30],
    "slack-bot": "xox" + "b-1234567890-1234567890123-" + ALNUM[:24],
    "slack-user": "xox" + "p-1234567890-" + ALNUM[:20],
    "aws": "AKIA" + "IOSFODNN7EXAMPLE",
    "aws-session": "ASIA" + "Y34FZKBOKMUTVV7A",
    "google": "AIza" + "SyD-" + ALNUM[:31],
    "stripe-live": "sk" + "_live_" + ALNUM[:24],
    "stripe-restricted": "rk" + "_live_" + ALNUM[:24],
    "stripe-test": "sk" + "_test_" + ALNUM[:24],
    "jwt": "eyJ"
    + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_each_kind_of_key_is_redacted_inside_ordinary_text(name: str) -> None:
    secret = SECRETS[name]
    text, count = redact(f"export TOKEN={secret} && curl api")
    assert secret not in text
    assert text == f"export TOKEN={REDACTED} && curl api"
    assert count == 1


def test_bearer_token_keeps_the_word_bearer() -> None:
    token = "abc123" + ALNUM
    text, count = redact(f'curl -H "Authorization: Bearer {token}" https://api.example.com')
    assert text == f'curl -H "Authorization: Bearer {REDACTED}" https://api.example.com'
    assert count == 1


def test_bearer_jwt_counts_once() -> None:
    text, count = redact("Authorization: Bearer " + SECRETS["jwt"])
    assert text == f"Authorization: Bearer {REDACTED}"
    assert count == 1


def test_pem_private_key_block_is_redacted_whole() -> None:
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nq8Xb+/=\n-----END RSA PRIVATE KEY-----"
    text, count = redact(f"key:\n{pem}\ndone")
    assert text == f"key:\n{REDACTED}\ndone"
    assert count == 1
    openssh = (
        "-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAA\\n-----END OPENSSH PRIVATE KEY-----"
    )
    assert redact(openssh) == (REDACTED, 1)


def test_pem_key_cut_by_a_preview_is_still_redacted() -> None:
    text, count = redact("→ -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC")
    assert text == f"→ {REDACTED}"
    assert count == 1


def test_public_key_and_certificate_are_not_secrets() -> None:
    public = "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkq\n-----END PUBLIC KEY-----"
    assert redact(public) == (public, 0)


def test_connection_url_keeps_user_and_host_but_not_password() -> None:
    text, count = redact("DATABASE_URL=postgres://app:s3cr3t-P4ss@db.internal:5432/app")
    assert text == f"DATABASE_URL=postgres://app:{REDACTED}@db.internal:5432/app"
    assert count == 1
    assert redact("redis://:hunter2@cache:6379")[1] == 0  # no user: nothing to anchor on
    assert redact("mongodb+srv://root:pa55word@cluster0.example.net")[0] == (
        f"mongodb+srv://root:{REDACTED}@cluster0.example.net"
    )


@pytest.mark.parametrize(
    "text",
    [
        "entry_hash 8e09a6740d27a5c6d99ce58b2864d22e2b2503423a819096b5865633d73824a0",
        "prev_hash 0000000000000000000000000000000000000000000000000000000000000000",
        "event_id aa868977-3d61-4db0-b0a6-a1dc08ffbe1d",
        "commit 3fe3787ae78b13dceaa3357bbabc4b6c70030779",
        "pip install scikit-learn && task-runner-with-a-very-long-name-indeed",
        "Use Bearer authentication with a token from the vault",
        "see https://example.com:8080/path and git@github.com:org/repo.git",
        "the ask-for-confirmation-before-deleting-anything flag",
        "AKIA is a prefix; AKIASHORT is not a key",
        "toolu_01ABCDEFGHIJKLMNOPQRSTUV and msg_01XYZ",
    ],
)
def test_ordinary_text_hashes_and_ids_are_left_alone(text: str) -> None:
    assert redact(text) == (text, 0)


def test_redacting_twice_changes_nothing_more() -> None:
    once, count = redact(f"{SECRETS['openai']} Bearer {'x1' * 10} postgres://u:p4ss@h/db " + SECRETS["jwt"])
    assert count == 4
    assert redact(once) == (once, 0)


def test_redact_value_walks_json_and_keeps_keys() -> None:
    value = {
        "api_key": SECRETS["anthropic"],
        "nested": [{"cmd": "echo " + SECRETS["github-classic"]}, 3, None, True],
        "fine": "nothing here",
    }
    clean, count = redact_value(value)
    assert count == 2
    assert clean == {
        "api_key": REDACTED,
        "nested": [{"cmd": f"echo {REDACTED}"}, 3, None, True],
        "fine": "nothing here",
    }
    assert value["api_key"] == SECRETS["anthropic"]  # the input is not modified

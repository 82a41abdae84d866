"""The one redactor: secrets become ``[redacted]``, look-alikes survive, in linear time.

``tests/data/secrets.json`` is the corpus: every secret form must disappear
and every look-alike must come out unchanged. Fake secrets are assembled from
pieces (``«»`` in the corpus, ``+`` here) so no secret scanner mistakes this
repository for a leak.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from korg_bridge.redact import REDACTED, is_secret_name, redact, redact_arguments, redact_value
from korg_bridge.serving import audit
from korg_bridge.serving.audit import OUTPUT_PREVIEW_BYTES, output_preview
from tests.helpers.paths import DATA

CORPUS_PATH = DATA / "secrets.json"
SPLIT = "«»"


def _load() -> dict[str, list[dict[str, Any]]]:
    raw = json.loads(CORPUS_PATH.read_text(encoding="utf-8"))
    joined: dict[str, list[dict[str, Any]]] = {}
    for kind in ("secrets", "lookalikes"):
        joined[kind] = [
            {
                **entry,
                "text": entry["text"].replace(SPLIT, ""),
                "secrets": [s.replace(SPLIT, "") for s in entry.get("secrets", [])],
            }
            for entry in raw[kind]
        ]
    return joined


CORPUS = _load()
SECRET_FORMS = CORPUS["secrets"]
LOOKALIKES = CORPUS["lookalikes"]

ALNUM = "aB3dE5fG7hJ9kL2mN4pQ6rS8tU0vW1xY3zA5bC7dE9"
GITHUB = "ghp" + "_" + ALNUM[:36]
ANTHROPIC = "sk-" + "ant-api03-" + ALNUM + "-_xyzXYZ0123456789AA"
JWT = (
    "eyJ"
    + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)


# --- the corpus ------------------------------------------------------------------------------------


def test_the_corpus_holds_at_least_fifty_secret_forms_and_fifty_lookalikes() -> None:
    assert len(SECRET_FORMS) >= 50
    assert len(LOOKALIKES) >= 50
    assert len({entry["label"] for entry in SECRET_FORMS + LOOKALIKES}) == len(SECRET_FORMS + LOOKALIKES)


@pytest.mark.parametrize("entry", SECRET_FORMS, ids=[entry["label"] for entry in SECRET_FORMS])
def test_every_secret_form_in_the_corpus_disappears(entry: dict[str, Any]) -> None:
    text, count = redact(entry["text"])
    for secret in entry["secrets"]:
        assert secret in entry["text"]  # the corpus is consistent
        assert secret not in text
    assert REDACTED in text
    assert count == entry.get("count", count) >= 1


@pytest.mark.parametrize("entry", LOOKALIKES, ids=[entry["label"] for entry in LOOKALIKES])
def test_every_lookalike_in_the_corpus_comes_out_unchanged(entry: dict[str, Any]) -> None:
    assert redact(entry["text"]) == (entry["text"], 0)


@pytest.mark.parametrize("entry", SECRET_FORMS, ids=[entry["label"] for entry in SECRET_FORMS])
def test_redacting_redacted_text_changes_nothing_and_counts_nothing(entry: dict[str, Any]) -> None:
    once, _ = redact(entry["text"])
    assert redact(once) == (once, 0)


FRAGMENTS = [entry["text"] for entry in SECRET_FORMS + LOOKALIKES]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(FRAGMENTS), max_size=6), st.sampled_from([" ", "\n", "; ", " && ", "\\n", ""])
)
def test_redaction_is_idempotent_on_any_mix_of_the_corpus(parts: list[str], glue: str) -> None:
    once, _ = redact(glue.join(parts))
    assert redact(once) == (once, 0)


# --- names -----------------------------------------------------------------------------------------

SECRET_NAMES = [
    *("db_pass", "pwd", "jwt", "bearer", "session_id", "sessionid", "cookie", "passphrase"),
    *("client_secret", "private_key", "access_key", "api_key", "apiKey", "APIKey", "AUTH_TOKEN"),
    *("db-password", "clientSecret", "accesstoken", "Authorization", "credentials", "key", "x-api-key"),
    *("GITHUB_TOKEN", "SECRET_KEY_BASE", "DB_PASSWORD", "aws_secret_access_key", "sessionId", "api_tokens"),
    *("pin", "PIN", "card_pin", "pinCode", "passcode", "mnemonic", "signature", "x-hub-signature"),
]
PLAIN_NAMES = [
    *("pinned", "spin", "pin_version", "signature_algorithm", "signatures"),
    *("monkey", "keyword", "author", "max_tokens", "prompt_tokens", "query", "path", "turkey_count"),
    *("donkeys", "password_reset_url", "token_count", "public_key", "primary_key", "cache_key"),
    *("eos_token", "page_token", "secret_name", "tokenizer", "keyboard", "KEY_SPENDING", "token_summary"),
    *("self.token_summary", "publishable_key", "api_key_env", "key_path", "session", "tool_use_id"),
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_names_with_a_secret_word_are_secret(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", PLAIN_NAMES)
def test_names_that_merely_contain_or_describe_a_secret_word_are_not(name: str) -> None:
    assert not is_secret_name(name)


TEXT_FORMS = {
    "NAME=value": "{name}={value}",
    "NAME: value": "{name}: {value}",
    '"NAME": "value"': 'body {{"{name}": "{value}", "n": 1}}',
    "YAML name: value": "config:\n  {name}: {value}\n  other: 1",
    "export NAME=value": "export {name}={value} && run",
}
BRIEF_NAMES = [
    *("db_pass", "pwd", "jwt", "bearer", "session_id", "sessionid", "cookie", "passphrase"),
    *("client_secret", "private_key", "access_key"),
]


@pytest.mark.parametrize("form", sorted(TEXT_FORMS))
@pytest.mark.parametrize("name", BRIEF_NAMES)
def test_a_secret_named_value_is_redacted_in_every_text_form(name: str, form: str) -> None:
    value = "Qz7-" + "hunter2-vX9"
    text, count = redact(TEXT_FORMS[form].format(name=name, value=value))
    assert value not in text
    assert count == 1
    assert name in text  # the name stays: a reader sees what was hidden


@pytest.mark.parametrize("form", sorted(TEXT_FORMS))
@pytest.mark.parametrize("value", ["$DB_PASSWORD", "${DB_PASSWORD}", "<your-token>", "***", "[redacted]", ""])
def test_references_and_placeholders_are_not_secrets(value: str, form: str) -> None:
    text = TEXT_FORMS[form].format(name="DB_PASSWORD", value=value)
    assert redact(text) == (text, 0)


def test_an_agent_session_uuid_or_number_is_an_id_but_a_web_session_value_is_a_secret() -> None:
    for text in (
        '{"sessionId": "c9418d2b-ac9e-44dd-96fe-c9f311ec5800"}',
        "--session-id 4823",
        "session_id=48230",
    ):
        assert redact(text) == (text, 0)
    assert redact("session_id=q8w7e6r5t4y3u2i1o0p9") == (f"session_id={REDACTED}", 1)


def test_code_that_reads_a_secret_is_not_a_secret() -> None:
    text = 'password = getpass()\napi_key = os.environ["KEY"]\nclient = Client(token=token, api_key=api_key)'
    assert redact(text) == (text, 0)
    assert redact('PASSWORD = "hunter2-literal"')[0] == f'PASSWORD = "{REDACTED}"'


# --- formats ---------------------------------------------------------------------------------------

VENDOR_KEYS = {
    "anthropic": ANTHROPIC,
    "openai": "sk-" + ALNUM[:48],
    "openai-project": "sk-" + "proj-" + ALNUM + "_" + ALNUM[:20],
    "github-classic": GITHUB,
    "github-oauth": "gho" + "_" + ALNUM[:36],
    "github-server": "ghs" + "_" + ALNUM[:36],
    "github-user": "ghu" + "_" + ALNUM[:36],
    "github-refresh": "ghr" + "_" + ALNUM[:36],
    "github-fine-grained": "github" + "_pat_" + "11ABCDEFG0" + ALNUM[:12] + "_" + ALNUM[:30],
    "gitlab": "glpat" + "-" + ALNUM[:20],
    "huggingface": "hf" + "_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh",
    "npm": "npm" + "_" + ALNUM[:36],
    "sendgrid": "SG" + "." + ALNUM[:22] + "." + (ALNUM * 2)[:43],
    "slack-bot": "xox" + "b-1234567890-1234567890123-" + ALNUM[:24],
    "slack-user": "xox" + "p-1234567890-" + ALNUM[:20],
    "slack-app": "xapp" + "-1-A0123456789-1234567890-" + ALNUM[:30],
    "aws": "AKIA" + "IOSFODNN7EXAMPLE",
    "aws-session": "ASIA" + "Y34FZKBOKMUTVV7A",
    "google": "AIza" + "SyD-" + ALNUM[:31],
    "google-oauth-secret": "GOCSPX" + "-" + ALNUM[:28],
    "stripe-live": "sk" + "_live_" + ALNUM[:24],
    "stripe-restricted": "rk" + "_live_" + ALNUM[:24],
    "stripe-test": "sk" + "_test_" + ALNUM[:24],
    "stripe-webhook": "whsec" + "_" + ALNUM[:32],
    "pypi": "pypi" + "-AgEIcHlwaS5vcmc" + ALNUM,
    "docker": "dckr" + "_pat_" + ALNUM[:27],
    "digitalocean": "dop" + "_v1_" + "0123456789abcdef" * 4,
    "shopify": "shpat" + "_" + "0123456789abcdef" * 2,
    "twilio": "SK" + "0123456789abcdef" * 2,
    "telegram": "123456789" + ":AA" + ALNUM[:33],
    "discord": "MT" + ALNUM[:22] + "." + ALNUM[:6] + "." + ALNUM[:38],
    "jwt": JWT,
}


@pytest.mark.parametrize("name", sorted(VENDOR_KEYS))
def test_each_vendor_key_is_redacted_inside_ordinary_text(name: str) -> None:
    secret = VENDOR_KEYS[name]
    text, count = redact(f"echo {secret} | next-step")
    assert text == f"echo {REDACTED} | next-step"
    assert count == 1


def test_a_stripe_publishable_key_is_not_a_secret() -> None:
    text = "pk" + "_live_" + ALNUM[:24]
    assert redact(text) == (text, 0)


def test_bearer_token_keeps_the_word_bearer_and_prose_keeps_its_bearer() -> None:
    token = "abc123" + ALNUM
    assert redact(f'curl -H "Authorization: Bearer {token}" https://x') == (
        f'curl -H "Authorization: Bearer {REDACTED}" https://x',
        1,
    )
    assert redact("Authorization: Bearer " + JWT) == (f"Authorization: Bearer {REDACTED}", 1)
    prose = "Use Bearer authentication; Basic auth is off."
    assert redact(prose) == (prose, 0)


@pytest.mark.parametrize(
    "label", ["RSA", "EC", "DSA", "OPENSSH", "ENCRYPTED", "PGP", "PKCS8"], ids=lambda label: label
)
def test_private_key_blocks_are_redacted_whole(label: str) -> None:
    kind = {"PGP": "PGP PRIVATE KEY BLOCK", "PKCS8": "PRIVATE KEY"}.get(label, f"{label} PRIVATE KEY")
    block = f"-----BEGIN {kind}-----\nMIIEowIBAAKCAQEA7\nq8Xb+/=\n-----END {kind}-----"
    assert redact(f"key:\n{block}\ndone") == (f"key:\n{REDACTED}\ndone", 1)


def test_a_private_key_cut_mid_block_is_still_redacted() -> None:
    assert redact("→ -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC") == (f"→ {REDACTED}", 1)


def test_public_keys_and_certificates_are_not_secrets() -> None:
    text = "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkq\n-----END PUBLIC KEY-----\n-----BEGIN CERTIFICATE-----\nMIIB\n"
    assert redact(text) == (text, 0)


def test_url_password_runs_to_the_last_at_before_the_host_and_may_have_no_user() -> None:
    assert redact("postgres://u:p@ss@host/db") == (f"postgres://u:{REDACTED}@host/db", 1)
    assert redact("redis://:hunter2@cache:6379") == (f"redis://:{REDACTED}@cache:6379", 1)
    assert redact("https://u:pw1@host/a/@b?c=d@e") == (f"https://u:{REDACTED}@host/a/@b?c=d@e", 1)
    plain = "https://example.com:8080/p@x git@github.com:o/r.git postgres://u:${PW}@h/db"
    assert redact(plain) == (plain, 0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mysql -u root -psecret1 app", f"mysql -u root -p{REDACTED} app"),
        ("mysqldump -h db -uroot -p'pw 1' app", f"mysqldump -h db -uroot -p{REDACTED} app"),
        ("tool --password=hunter2 --x", f"tool --password={REDACTED} --x"),
        ("tool --password hunter2 --x", f"tool --password {REDACTED} --x"),
        ("tool --token abc123 --x", f"tool --token {REDACTED} --x"),
        ("curl -u admin:pw123 https://x", f"curl -u admin:{REDACTED} https://x"),
        ("sshpass -p pw123 ssh h", f"sshpass -p {REDACTED} ssh h"),
    ],
)
def test_passwords_in_command_lines_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == (expected, 1)


@pytest.mark.parametrize(
    "text",
    [
        "docker run -p 8080:80 nginx",
        "docker run -p8080:80 nginx",
        "ssh -p 2222 host",
        "mkdir -p /tmp/a/b",
        "mysql -u root -p app",
        "mysql -P3306 -u root app",
        "curl -u admin https://x",
        "docker login -u me --password-stdin",
        "git push -u origin main",
    ],
)
def test_port_flags_mkdir_p_and_prompting_password_flags_are_not_secrets(text: str) -> None:
    assert redact(text) == (text, 0)


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Basic YWRtaW46c2VjcmV0",
        "Proxy-Authorization: Basic YWRtaW46c2VjcmV0",
        "curl -H 'X-Api-Key: 0a1b2c3d4e' https://x",
        "Cookie: sid=abc123; theme=dark",
        "< Set-Cookie: session=abc123; Path=/; HttpOnly",
    ],
)
def test_credential_headers_are_redacted(text: str) -> None:
    clean, count = redact(text)
    assert count == 1
    assert "YWRtaW46c2VjcmV0" not in clean and "0a1b2c3d4e" not in clean and "abc123" not in clean


def test_aws_secret_access_keys_are_redacted_in_their_contexts() -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
    for text in (
        f"aws_secret_access_key = {secret}",
        f"AWS_SECRET_ACCESS_KEY={secret}",
        f"aws configure set aws_secret_access_key {secret}",
        f'{{"SecretAccessKey": "{secret}"}}',
    ):
        clean, count = redact(text)
        assert secret not in clean
        assert count == 1


# --- counting ----------------------------------------------------------------------------------------


def test_a_vendor_key_inside_a_token_line_counts_once() -> None:
    assert redact(f"GITHUB_TOKEN={GITHUB}") == (f"GITHUB_TOKEN={REDACTED}", 1)
    assert redact(f'"api_key": "{ANTHROPIC}"') == (f'"api_key": "{REDACTED}"', 1)


def test_each_separate_secret_counts_once() -> None:
    text, count = redact(f"{GITHUB} Bearer {'x1' * 10} postgres://u:p4ss@h/db {JWT} DB_PASSWORD=pw9")
    assert count == 5
    assert text.count(REDACTED) == 5


def test_a_secret_written_twice_counts_once() -> None:
    text, count = redact(f"export GITHUB_TOKEN={GITHUB}\n+ curl -H 'Authorization: token {GITHUB}'")
    assert GITHUB not in text and text.count(REDACTED) == 2
    assert count == 1


def test_one_seen_set_counts_each_secret_once_over_several_texts() -> None:
    seen: set[str] = set()
    assert redact(f"echo {GITHUB}", seen)[1] == 1
    assert redact(f"output: {GITHUB} and {JWT}", seen)[1] == 1  # only the JWT is new
    assert redact_value({"cmd": f"echo {GITHUB}", "password": "hunter2-Qz7"}, seen)[1] == 1
    assert redact("the password is hunter2-Qz7", seen)[1] == 0  # the same value, named in prose


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("the password is hunter2", "hunter2"),
        ("The staging DB password was Tr0ub4dor&3, rotate it.", "Tr0ub4dor&3"),
        ("The PIN for the side door is 4821.", "4821"),
        ("Our API key is `k3y-Zq81` for now", "k3y-Zq81"),
        ("Login as admin, password: s3cret!x", "s3cret!x"),
    ],
)
def test_a_password_said_in_prose_is_redacted(text: str, secret: str) -> None:
    clean, count = redact(text)
    assert secret not in clean and REDACTED in clean and count == 1


@pytest.mark.parametrize(
    "text",
    [
        "The password is correct; the username was wrong.",
        "The password is 12 characters long.",
        "The password is stored in Vault.",
        "The page token is 2 on the second call.",
        "The sort key is created_at.",
    ],
)
def test_prose_about_a_password_without_one_is_left_alone(text: str) -> None:
    assert redact(text) == (text, 0)


# --- JSON values -----------------------------------------------------------------------------------


def test_redact_value_walks_json_redacts_secret_named_values_and_leaves_the_input_alone() -> None:
    value = {
        "api_key": "plain-value-one",
        "nested": [{"cmd": "echo " + GITHUB, "db_pass": "hunter2"}, 3, None, True],
        "credentials": {"user": "bob", "password": "x"},
        "fine": "nothing here",
        "auth": True,
        "token": None,
        "secret": "",
        "max_tokens": 100,
        "session_id": "c9418d2b-ac9e-44dd-96fe-c9f311ec5800",
        GITHUB: "a key as a property name",
    }
    clean, count = redact_value(value)
    assert clean == {
        "api_key": REDACTED,
        "nested": [{"cmd": f"echo {REDACTED}", "db_pass": REDACTED}, 3, None, True],
        "credentials": REDACTED,
        "fine": "nothing here",
        "auth": True,
        "token": None,
        "secret": "",
        "max_tokens": 100,
        "session_id": "c9418d2b-ac9e-44dd-96fe-c9f311ec5800",
        REDACTED: "a key as a property name",
    }
    assert count == 4  # the GitHub key in a command and as a property name is one secret
    assert value["api_key"] == "plain-value-one"
    assert redact_value(clean) == (clean, 0)


def test_redact_arguments_makes_plain_json_and_redacts_it() -> None:
    arguments = {"password": "hunter2", "when": Path("/tmp/x"), "items": ("a", f"token={GITHUB}")}
    assert redact_arguments(arguments) == {
        "password": REDACTED,
        "when": "/tmp/x",
        "items": ["a", f"token={REDACTED}"],
    }
    assert redact_arguments(None) == {} == redact_arguments({})


def test_json_nested_deeper_than_the_walk_is_replaced_whole() -> None:
    deep: Any = "sk-" + ALNUM
    for _ in range(500):
        deep = [deep]
    clean, count = redact_value(deep)
    assert count == 1
    assert "sk-" not in json.dumps(clean)


# --- one redactor, in the audit preview too ----------------------------------------------------------


def test_there_is_one_redactor_for_the_bridge_and_recall() -> None:
    assert importlib.util.find_spec("korg_bridge.recall.redact") is None
    assert audit.redact is redact
    assert audit.is_secret_name is is_secret_name
    assert audit.redact_arguments is redact_arguments


STRADDLING = {
    "vendor key": ("sk-" + "ant-api03-" + "Q" * 40, "QQQ"),
    "KEY=value line": ("DB_PASSWORD=" + "S3cr3tValue" * 8, "S3cr3t"),
    "JSON password": ('{"password": "' + "S3cr3tValue" * 8 + '"}', "S3cr3t"),
    "URL password with @": ("postgres://app:" + "p@ss" * 30 + "@db.internal/app", "p@ss"),
    "private key block": ("-----BEGIN RSA PRIVATE KEY-----\n" + "MIIEowIBAAKC\n" * 400, "MIIE"),
    "Authorization header": ("\nAuthorization: Basic " + "YWRtaW46c2VjcmV0" * 6, "YWRtaW46"),
}


@pytest.mark.parametrize("kind", sorted(STRADDLING))
def test_a_secret_straddling_the_preview_end_is_still_redacted(kind: str) -> None:
    secret, fragment = STRADDLING[kind]
    head = "x" * (OUTPUT_PREVIEW_BYTES - 30) + "\n"
    preview, truncated = output_preview(head + secret + "\nthe build went on. " * 500)
    assert truncated
    assert fragment not in preview
    assert preview.startswith(head)


# --- linear time -------------------------------------------------------------------------------------

HANG_GUARD = """
import sys
from korg_bridge.redact import redact
n = 200_000
for unit in sys.argv[1:]:
    redact((unit * (n // len(unit) + 1))[:n])
print("done")
"""
ADVERSARIAL = ["a.", "a:", "x://", ":@", "-----BEGIN ", "eyJ", "Bearer ", "KEY=", "--password ", " ", "sk-"]


@pytest.mark.anyio
async def test_adversarial_inputs_of_200_kb_finish_without_hanging() -> None:
    # A child process: a backtracking regex holds the GIL, so only a process can be timed out.
    with anyio.fail_after(60):
        done = await anyio.run_process([sys.executable, "-c", HANG_GUARD, *ADVERSARIAL], check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "done"


def test_real_transcripts_keep_their_uuids_and_hashes(peers: Path) -> None:
    ids = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|\b[0-9a-f]{40,64}\b")
    files = sorted((peers / "transcripts").rglob("*.jsonl")) + sorted((peers / "ledgers").rglob("*.jsonl"))
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        clean, _ = redact(text)
        lost = {found for found in ids.findall(text) if found not in clean}
        assert not lost, f"{path.name}: {sorted(lost)[:3]}"


def test_a_text_found_clean_is_remembered_and_a_secret_never_is() -> None:
    """A write redacts its text three times (checked, stored, logged): a text found clean once is
    given back at once after -- only texts with no secret, only short ones, bounded in all."""
    import korg_bridge.redact as redactor

    clean = "the staging database listens on port 5433 (remembered clean)"
    assert redact(clean) == (clean, 0)
    assert clean in redactor._CLEAN
    assert redact(clean) == (clean, 0)
    secret = f"export GITHUB_TOKEN={'ghp_' + 'a1B2' * 9}"
    once, count = redact(secret)
    assert count == 1 and secret not in redactor._CLEAN
    assert redact(secret) == (once, 1)  # counted again: nothing of it was remembered
    long = "plain words " * 10_000
    assert redact(long) == (long, 0) and long not in redactor._CLEAN
    assert redactor._clean_chars <= redactor._CLEAN_MAX_CHARS

"""The console's guards: Host/Origin (DNS rebinding), CSRF, security headers, body limit, tokens,
sessions and per-token rate limits; secrets stay redacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from korg_bridge.auth.ratelimit import Rate
from korg_bridge.auth.tokens import Keyring, parse_tokens
from korg_bridge.errors import ConfigError
from korg_bridge.recall.console.app import Settings, build_app
from korg_bridge.recall.console.security import CSP, CSRF_COOKIE
from tests.helpers.console import console_client, write_transcript
from tests.helpers.memory import git_repo

pytestmark = pytest.mark.anyio

ANA = "ana-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = git_repo(tmp_path / "shop")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    return repo


def keyring() -> Keyring:
    return Keyring(parse_tokens(f"{ANA} acme ana\n{BOB} acme bob\n", "test tokens"))


async def test_a_foreign_host_is_refused_before_anything_else(project: Path) -> None:
    async with console_client(cwd=project) as (client, _app):
        rebound = await client.get("/api/v1/memories", headers={"host": "evil.example:8377"})
        assert rebound.status_code == 421
        assert rebound.json()["error"]["code"] == "misdirected"
        for host in ("127.0.0.1:8377", "localhost:9999", "[::1]:8377"):
            assert (await client.get("/api/v1/status", headers={"host": host})).status_code == 200, host


async def test_a_request_from_another_origin_is_refused_even_with_the_csrf_token(project: Path) -> None:
    async with console_client(cwd=project) as (client, _app):
        token = await client.csrf()
        forged = await client.http.post(
            "/api/v1/memories",
            json={"content": "planted", "type": "note"},
            headers={"origin": "http://evil.example", "x-csrf-token": token},
        )
        assert forged.status_code == 403 and forged.json()["error"]["code"] == "forbidden_origin"
        same = await client.http.post(
            "/api/v1/memories",
            json={"content": "mine", "type": "note"},
            headers={"origin": "http://127.0.0.1:8377", "x-csrf-token": token},
        )
        assert same.status_code == 201


async def test_state_changes_need_the_double_submit_token_as_header_or_form_field(project: Path) -> None:
    async with console_client(cwd=project) as (client, _app):
        bare = await client.http.post("/api/v1/memories", json={"content": "x", "type": "note"})
        assert bare.status_code == 403 and bare.json()["error"]["code"] == "csrf"
        token = await client.csrf()
        wrong = await client.http.post(
            "/api/v1/memories", json={"content": "x", "type": "note"}, headers={"x-csrf-token": "A" * 43}
        )
        assert wrong.status_code == 403
        no_cookie = await client.http.post(
            "/api/v1/memories",
            json={"content": "x", "type": "note"},
            headers={"x-csrf-token": token, "cookie": ""},
        )
        assert no_cookie.status_code == 403
        form = await client.http.post("/logout", data={"csrf_token": await client.csrf()})
        assert form.status_code == 303  # a plain HTML form works without JavaScript
        assert (await client.http.post("/logout", data={"csrf_token": "nope"})).status_code == 403


async def test_every_answer_carries_the_security_headers(project: Path) -> None:
    async with console_client(cwd=project) as (client, _app):
        for response in (
            await client.get("/"),
            await client.get("/api/v1/memories"),
            await client.get("/api/v1/memories/nope"),
            await client.get("/api/openapi.json"),
            await client.get("/metrics"),
            await client.http.post("/api/v1/memories", json={}),
            await client.get("/no/such/page"),
        ):
            headers = response.headers
            assert headers["content-security-policy"] == CSP
            assert (
                "default-src 'self'" in CSP and "unsafe-inline" not in CSP and "frame-ancestors 'none'" in CSP
            )
            assert headers["x-content-type-options"] == "nosniff"
            assert headers["referrer-policy"] == "no-referrer"
            assert headers["cache-control"] == "no-store"


async def test_the_csrf_cookie_is_strict_and_the_session_cookie_http_only(project: Path) -> None:
    async with console_client(cwd=project, keyring=keyring()) as (client, _app):
        page = await client.get("/login")
        assert "SameSite=Strict" in page.headers["set-cookie"] and CSRF_COOKIE in page.headers["set-cookie"]
        signed = await client.http.post("/login", data={"csrf_token": await client.csrf(), "token": ANA})
        assert signed.status_code == 303
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        assert ANA not in cookie  # the token itself never sits in a cookie


async def test_a_body_over_the_limit_is_413_with_or_without_a_content_length(project: Path) -> None:
    async with console_client(cwd=project, max_body_bytes=1000) as (client, _app):
        big = {"content": "x" * 2000, "type": "note"}
        declared = await client.post("/api/v1/memories", json=big)
        assert declared.status_code == 413

        async def chunks():  # type: ignore[no-untyped-def]
            for _ in range(5):
                yield b'{"content": "' + b"y" * 400

        streamed = await client.http.post(
            "/api/v1/memories",
            content=chunks(),
            headers={"x-csrf-token": await client.csrf(), "content-type": "application/json"},
        )
        assert streamed.status_code == 413


async def test_with_tokens_the_api_needs_one_and_pages_send_a_person_to_sign_in(project: Path) -> None:
    async with console_client(cwd=project, keyring=keyring()) as (client, _app):
        assert (await client.get("/api/v1/memories")).status_code == 401
        wrong = await client.get("/api/v1/memories", headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401 and "WWW-Authenticate" in wrong.headers
        page = await client.get("/")
        assert page.status_code == 303 and page.headers["location"] == "/login"
        ok = await client.get("/api/v1/status", headers={"authorization": f"Bearer {ANA}"})
        assert ok.json()["actor"] == "ana"
        # A bearer token is not something another site can make a browser send: no CSRF token needed.
        made = await client.http.post(
            "/api/v1/memories",
            json={"content": "By token.", "type": "note"},
            headers={"authorization": f"Bearer {BOB}"},
        )
        assert made.status_code == 201
        bad = await client.http.post("/login", data={"csrf_token": await client.csrf(), "token": "guess"})
        assert bad.status_code == 401
        good = await client.http.post("/login", data={"csrf_token": await client.csrf(), "token": ANA})
        assert good.status_code == 303
        assert (await client.get("/api/v1/status")).json()["actor"] == "ana"  # the session cookie
        via_cookie = await client.http.post("/api/v1/memories", json={"content": "x", "type": "note"})
        assert via_cookie.status_code == 403  # a cookie session needs the CSRF token
        await client.http.post("/logout", data={"csrf_token": await client.csrf()})
        assert (await client.get("/api/v1/status")).status_code == 401


async def test_each_token_has_its_own_rate_limit(project: Path) -> None:
    async with console_client(cwd=project, keyring=keyring(), rate_limit=Rate(5, 60.0)) as (client, _app):
        answers = [
            (await client.get("/api/v1/status", headers={"authorization": f"Bearer {ANA}"})).status_code
            for _ in range(7)
        ]
        assert answers[:5] == [200] * 5 and answers[5:] == [429, 429]
        refused = await client.get("/api/v1/status", headers={"authorization": f"Bearer {ANA}"})
        assert int(refused.headers["retry-after"]) >= 1 and refused.json()["error"]["code"] == "rate_limited"
        assert (
            await client.get("/api/v1/status", headers={"authorization": f"Bearer {BOB}"})
        ).status_code == 200


def test_a_non_loopback_console_without_tokens_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="without tokens"):
        build_app(Settings(env={}, host="0.0.0.0"))


async def test_secrets_stay_redacted_in_memories_and_history(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    folder = tmp_path / "t"
    write_transcript(folder, "sess-s", project, [(f"export GITHUB_TOKEN={secret}", "ok")])
    monkeypatch.setenv("KORG_RECALL_LEDGER", str(folder))
    async with console_client(cwd=project) as (client, _app):
        made = (
            await client.post("/api/v1/memories", json={"content": f"The token is {secret}", "type": "note"})
        ).json()
        detail = await client.get(f"/api/v1/memories/{made['id']}")
        assert secret not in detail.text
        timeline = await client.get("/api/v1/history/sessions/sess-s")
        assert timeline.status_code == 200 and secret not in timeline.text
        ref = timeline.json()["events"][0]["ref"]
        assert secret not in (await client.get(f"/api/v1/history/events/{ref}")).text
        assert (
            secret
            not in (
                await client.get("/api/v1/history/search", params={"q": "GITHUB_TOKEN", "mode": "keyword"})
            ).text
        )

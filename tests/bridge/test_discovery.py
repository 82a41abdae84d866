"""Discovery, in process: finding the binary the way a shell would, running
``--introspect`` on real fixture executables, and failing with the right
error type and exit code for every broken or hostile document."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from korg_bridge.bridge.discovery import MAX_DOCUMENT_BYTES, decode_document, discover, resolve_binary
from korg_bridge.errors import BinaryNotFound, DiscoveryError, DocumentError
from tests.helpers.bridge_client import BROKEN, FIXTURE_BINS, REPO, THUMP, THUMP_SKIPPED, read_pid, wait_dead
from tests.helpers.cli import python_env

pytestmark = pytest.mark.anyio

PYTHON_DIR = os.path.dirname(sys.executable)


@pytest.fixture(autouse=True)
def _python_first_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures run ``/usr/bin/env python3``: make that this interpreter."""
    monkeypatch.setenv("PATH", python_env()["PATH"])


# --- resolution --------------------------------------------------------------


async def test_an_absolute_path_is_used_as_given() -> None:
    document = await discover(str(THUMP))
    assert document.binary == "thump"
    assert document.version == "1.2.3"
    assert document.path == str(THUMP)
    assert document.get("thump.echo") is not None


async def test_a_relative_path_with_a_slash_is_resolved_against_the_cwd(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    for spelling in ("fixture_bins/thump", "./fixture_bins/thump", "fixture_bins/../fixture_bins/thump"):
        document = await discover(spelling)
        assert document.path == str(REPO / spelling), spelling  # absolute; ".." kept for the kernel


async def test_a_tilde_path_expands_to_home(isolated_env: Path) -> None:
    bin_dir = isolated_env / "bin"
    bin_dir.mkdir()
    (bin_dir / "thump").symlink_to(THUMP)
    document = await discover("~/bin/thump")
    assert document.binary == "thump"
    assert document.path == str(bin_dir / "thump")  # absolute, the symlink kept


async def test_a_bare_name_is_looked_up_on_the_path_given_in_env() -> None:
    env = {"PATH": os.pathsep.join([PYTHON_DIR, str(FIXTURE_BINS)])}
    document = await discover("thump", env=env)
    assert document.path == str(THUMP)
    assert resolve_binary("thump", env=env) == str(THUMP)


def test_a_bare_name_is_not_looked_up_in_the_current_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(FIXTURE_BINS)
    with pytest.raises(BinaryNotFound, match=r"binary not found on PATH: 'thump'.*pass \./thump") as info:
        resolve_binary("thump", env={"PATH": str(REPO / "nowhere")})
    assert info.value.exit_code == 7


@pytest.mark.parametrize(
    ("binary", "phrase"),
    [
        ("/definitely/not/here/thump", "binary not found: '/definitely/not/here/thump'. Check the path."),
        (
            "no-such-korg-binary-xyz",
            "binary not found on PATH: 'no-such-korg-binary-xyz'. Pass an absolute path",
        ),
        (str(FIXTURE_BINS), "is a directory, not an executable file"),
        (str(BROKEN / "not-executable"), "is not executable. Run: chmod +x"),
        ("", "no binary given"),
    ],
    ids=["missing-path", "missing-on-path", "directory", "not-executable", "empty"],
)
async def test_a_binary_that_cannot_be_run_is_binary_not_found_exit_7(binary: str, phrase: str) -> None:
    with pytest.raises(BinaryNotFound) as info:
        await discover(binary)
    assert info.value.exit_code == 7
    assert phrase in info.value.message
    assert "\n" not in info.value.message


@pytest.mark.parametrize(
    ("content", "phrase"),
    [
        ("#!/definitely/not/an/interpreter\n", "cannot run binary"),
        ("\x7fELF garbage that is not a program\n", "cannot run binary"),
    ],
    ids=["missing-interpreter", "not-a-program"],
)
async def test_an_executable_the_kernel_refuses_is_binary_not_found(
    tmp_path: Path, content: str, phrase: str
) -> None:
    fake = tmp_path / "fake"
    fake.write_text(content)
    fake.chmod(0o755)
    with pytest.raises(BinaryNotFound, match=phrase) as info:
        await discover(str(fake))
    assert info.value.exit_code == 7


# --- broken documents --------------------------------------------------------

BAD_DOCUMENTS = {
    "notjson": "did not print JSON",
    "array": "is an array, not an object",
    "wrongschema": "unsupported introspect schema 'korg:introspect@v0'",
    "nocallables": "no 'callables' array (missing)",
    "callables-object": "no 'callables' array (an object)",
    "missingfield": "callables[1] is missing required field 'input_schema'",
    "duplicate": "duplicate command_id 'duplicate.hello'",
    "deep": "nested too deeply",
    "huge": f"more than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB",
    "empty": "printed nothing",
    "crash": "exited 1 and printed no JSON",
    "badutf8-json": "did not print JSON",
}


@pytest.mark.parametrize("fixture", list(BAD_DOCUMENTS))
async def test_a_broken_document_is_a_document_error_exit_3(fixture: str) -> None:
    with anyio.fail_after(60), pytest.raises(DocumentError) as info:
        await discover(str(BROKEN / fixture))
    assert info.value.exit_code == 3
    message = info.value.message
    assert message.startswith(f"{BROKEN / fixture}"), message  # names the binary
    assert BAD_DOCUMENTS[fixture] in message
    assert "\n" not in message
    assert len(message) < 600


async def test_a_crashing_binary_has_its_error_line_quoted() -> None:
    with pytest.raises(DocumentError, match="RuntimeError: crash fixture: boom"):
        await discover(str(BROKEN / "crash"))


async def test_a_binary_that_hangs_is_a_discovery_error_exit_4_and_its_group_dies(tmp_path: Path) -> None:
    pid_file = tmp_path / "hang.pid"
    env = {**python_env(), "KORG_FIXTURE_PIDFILE": str(pid_file)}
    with anyio.fail_after(30), pytest.raises(DiscoveryError) as info:
        await discover(str(BROKEN / "hang"), timeout=1, env=env)
    assert type(info.value) is DiscoveryError
    assert info.value.exit_code == 4
    assert "did not finish within 1 s" in info.value.message
    assert "--discovery-timeout" in info.value.message
    await wait_dead([read_pid(pid_file), read_pid(Path(f"{pid_file}.parent"))], timeout=10)


async def test_a_document_printed_with_a_non_zero_exit_is_accepted() -> None:
    document = await discover(str(BROKEN / "clap-exit2"))
    assert [c.command_id for c in document.callables] == ["clap-exit2.hello"]


async def test_a_document_with_only_bad_callables_has_zero_tools_and_says_why() -> None:
    document = await discover(str(BROKEN / "allbad"))
    assert document.callables == ()
    reasons = {s.command_id: s.reason for s in document.skipped}
    assert set(reasons) == {"allbad.bad id!", "allbad..empty", "allbad.-dash", "allbad.badprop"}
    assert "'bad name' cannot be a command-line flag" in reasons["allbad.badprop"]


async def test_invalid_utf8_in_a_document_becomes_replacement_characters() -> None:
    document = await discover(str(BROKEN / "nonutf8doc"))
    (spec,) = document.callables
    assert spec.description is not None and "\ufffd" in spec.description


async def test_thump_skips_exactly_its_unservable_callables() -> None:
    document = await discover(str(THUMP))
    skipped = {s.command_id: s.reason for s in document.skipped}
    assert set(skipped) == THUMP_SKIPPED
    assert "not a valid JSON Schema" in skipped["thump.badschema"]
    assert "type 'object'" in skipped["thump.notobject"]
    assert document.exit_meaning(9) == "error.thump_custom"
    assert document.exit_meaning(2) == "error.usage"
    assert document.exit_meaning(99) == "unknown"


def test_decode_document_refuses_oversized_input_before_parsing() -> None:
    with pytest.raises(DocumentError, match="more than 16 MiB"):
        decode_document(b" " * (MAX_DOCUMENT_BYTES + 1), label="big")


def test_the_fixture_not_executable_really_lacks_the_execute_bit() -> None:
    # Guards the test above: a checkout that lost file modes would make it pass vacuously.
    assert not os.access(BROKEN / "not-executable", os.X_OK)
    assert os.access(THUMP, os.X_OK)

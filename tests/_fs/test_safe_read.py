"""The one capped regular-file reader: what it refuses, without blocking, and where it stops."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

import pytest

from korg_bridge._fs.safe_read import NotRegular, RegularFile, not_regular, read_head, read_regular


def test_a_fifo_is_refused_at_once_naming_what_it_is(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NotRegular) as caught:
        read_regular(fifo, 100)  # a plain open() would wait here for a writer forever
    assert caught.value.kind == "a FIFO (named pipe)"
    assert isinstance(caught.value, OSError)


def test_a_folder_and_a_device_are_refused(tmp_path: Path) -> None:
    with pytest.raises(NotRegular, match="a directory"):
        read_regular(tmp_path, 100)
    with pytest.raises(NotRegular, match="a character device"):
        read_regular("/dev/zero", 100)  # reading it would never end


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(NotRegular) as caught:
            read_regular(path, 100)
    assert caught.value.kind == "a socket"


def test_a_file_within_the_cap_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    got = read_regular(path, 100)
    assert (got.data, got.over, got.info.st_size) == (b"x" * 100, False, 100)


def test_a_file_over_the_cap_is_flagged_and_not_returned_in_part(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 101)
    got = read_regular(path, 100)
    assert (got.data, got.over) == (b"", True)


def test_a_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "nothing", 100)


def test_a_link_is_followed_unless_the_caller_says_links_are_not(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"secret")
    link = tmp_path / "link"
    link.symlink_to(target)
    assert read_regular(link, 100).data == b"secret"
    with pytest.raises(OSError) as caught:
        read_regular(link, 100, follow=False)
    assert caught.value.errno == errno.ELOOP
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "absent")
    with pytest.raises(OSError) as caught:
        read_regular(dangling, 100, follow=False)
    assert caught.value.errno == errno.ELOOP


def test_a_name_is_read_relative_to_an_open_folder(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"here")
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        assert read_regular("f", 100, dir_fd=fd, follow=False).data == b"here"
    finally:
        os.close(fd)


def test_the_head_is_the_first_bytes_only(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    assert read_head(path, 4) == b"0123"
    assert read_head(path, 100) == b"0123456789"


def test_a_descriptor_reader_reads_at_offsets_and_closes(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abcdef")
    with RegularFile(path) as file:
        assert file.pread(2, 3) == b"de"
        assert file.stat.st_size == 6
        fd = file.fd
    assert file.fd == -1
    with pytest.raises(OSError):
        os.fstat(fd)


def test_not_regular_names_every_kind() -> None:
    assert not_regular(os.stat("/dev/null").st_mode) == "a character device"
    assert not_regular(os.stat(__file__).st_mode) is None

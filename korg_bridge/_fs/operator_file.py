"""A file only the operator should control (a token file, korg-recall's tenant ledgers), read safely.

Shared by the HTTP bridge's token file and korg-recall's per-tenant history sources: both decide
who may read what, so a file other users can write is refused, and one they can read is named.
"""

from __future__ import annotations

import logging

from korg_bridge._fs.safe_read import NotRegular, RegularFile
from korg_bridge.errors import ConfigError

__all__ = ["read_operator_file"]

log = logging.getLogger(__name__)

MAX_BYTES = 1024 * 1024
"""Largest file read unless the caller says otherwise: a bound on what a mistake costs."""


def read_operator_file(
    path: str, *, what: str, flag: str, content: str, others_could: str, max_bytes: int = MAX_BYTES
) -> str:
    """The text of a file only the operator should control (a token file, korg-recall's tenant
    ledgers), read safely: a regular file (a FIFO would hang the read), at most ``max_bytes``,
    UTF-8. Warns when other users can read it; refuses it when they can write it, since
    whoever can change it could then do what ``others_could`` says.

    ``what`` names the file in messages (``token file``), ``flag`` where its path was given,
    ``content`` what it should hold (``one token on each line``).

    Raises:
        ConfigError: the file cannot be read, is not a regular file, is too
            large, is not UTF-8, or other users can write it.
    """
    file = RegularFile(path)
    try:
        file.open()
    except NotRegular as exc:
        raise ConfigError(f"{what} {path} is not a regular file. Pass the path of a file.") from exc
    except OSError as exc:
        raise ConfigError(
            f"cannot read {what} {path}: {exc.strerror or exc}. Check the path given to {flag}."
        ) from exc
    with file:
        info = file.stat
        if info.st_mode & 0o022:
            raise ConfigError(
                f"{what} {path} can be written by other users, who could {others_could}; "
                f"restrict it with: chmod 600 {path}"
            )
        if info.st_mode & 0o044:
            log.warning("%s %s is readable by other users; restrict it with chmod 600", what, path)
        try:
            data, over = file.read(max_bytes)
        except OSError as exc:
            raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}.") from exc
    if over:
        raise ConfigError(f"{what} {path} is over {max_bytes // 1024} KiB; it should hold {content}.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path} is not UTF-8 text. Put {content}.") from exc

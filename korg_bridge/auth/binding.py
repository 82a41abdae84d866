"""Where the HTTP bridge listens and whom it lets in: ``[HOST:]PORT``, loopback,
and the Host/Origin allow-lists (the bearer tokens are :mod:`korg_bridge.auth.tokens`).

Kept apart from serving (:mod:`korg_bridge.serving.http`) because the CLI checks all
of it before it runs any binary: a missing token off loopback must fail in a
millisecond, not after discovery, and without importing the web stack.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from korg_bridge.errors import UsageError

if TYPE_CHECKING:
    from mcp.server.transport_security import TransportSecuritySettings

DEFAULT_HOST = "127.0.0.1"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
"""Host names a local client may use whatever address we are bound to."""

LISTEN_FORM = "expected [HOST:]PORT, e.g. 8080, 0.0.0.0:8080 or [::1]:8080"


def parse_listen(value: str) -> tuple[str, int]:
    """``"8080"`` → ``("127.0.0.1", 8080)``; ``"0.0.0.0:8080"``; ``"[::1]:8080"``.

    Port 0 asks the system for any free port (the log names the one chosen).

    Raises:
        UsageError: the value is not ``[HOST:]PORT``.
    """
    text = value.strip()
    host, port_text = DEFAULT_HOST, text
    if text.startswith("["):
        end = text.find("]")
        if end == -1 or text[end + 1 : end + 2] != ":":
            raise _bad_listen(value)
        host, port_text = text[1:end], text[end + 2 :]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _bad_listen(value) from None
    elif ":" in text:
        host, _, port_text = text.rpartition(":")
        if ":" in host:
            raise _bad_listen(value, " (put an IPv6 address in brackets)")
        if not host or any(c.isspace() or c in "/@?#" for c in host):
            raise _bad_listen(value)
    if not (port_text.isascii() and port_text.isdigit()) or int(port_text) > 65535:
        raise _bad_listen(value)
    return host, int(port_text)


def _bad_listen(value: str, hint: str = "") -> UsageError:
    return UsageError(f"invalid --http value {value!r}: {LISTEN_FORM}{hint}")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets)
    only ever reaches this machine."""
    name = host.strip().removeprefix("[").removesuffix("]").rstrip(".").lower()
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def bracketed(host: str) -> str:
    """How ``host`` appears in a Host header or URL: IPv6 addresses in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _with_any_port(entry: str) -> list[str]:
    """An entry without a port also matches it with any port (the SDK matches
    ``name:*`` only when a port is present, and ``name`` only when it is not)."""
    scheme, sep, authority = entry.rpartition("://")
    authority = bracketed(authority) if authority.count(":") > 1 else authority
    exact = f"{scheme}{sep}{authority}"
    if re.search(r":(\d+|\*)\Z", authority):
        return [exact]
    return [exact, f"{exact}:*"]


def security_settings(
    host: str, allowed_hosts: Sequence[str] = (), allowed_origins: Sequence[str] = ()
) -> TransportSecuritySettings:
    """DNS-rebinding protection: the loopback names and the bound host, any
    port, plus the caller's extra hosts and origins (``--allow-host``,
    ``--allow-origin``)."""
    names = [*LOOPBACK_HOSTS, bracketed(host)]
    hosts = [h for entry in [*names, *allowed_hosts] for h in _with_any_port(entry)]
    origins = [
        o for entry in [*(f"http://{n}" for n in names), *allowed_origins] for o in _with_any_port(entry)
    ]
    from mcp.server.transport_security import TransportSecuritySettings

    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(dict.fromkeys(hosts)),
        allowed_origins=list(dict.fromkeys(origins)),
    )

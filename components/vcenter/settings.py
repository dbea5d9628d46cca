"""Where and how to log in to vCenter: the `vsphere:*` stack keys, their env fallbacks, parsing.

No pyVmomi and no Pulumi here: the CLI (preflight) and the providers read settings the same way.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from components.vcenter.errors import VsphereError

# Stack config keys: the ones pulumi-vsphere reads, so one set of settings serves both providers.
CONFIG_SERVER = "vsphere:vsphereServer"
CONFIG_USER = "vsphere:user"
CONFIG_PASSWORD = "vsphere:password"
CONFIG_ALLOW_UNVERIFIED_SSL = "vsphere:allowUnverifiedSsl"

# Environment fallbacks, also the ones pulumi-vsphere (terraform-provider-vsphere) reads.
ENV_FALLBACKS: Mapping[str, str] = {
    CONFIG_SERVER: "VSPHERE_SERVER",
    CONFIG_USER: "VSPHERE_USER",
    CONFIG_PASSWORD: "VSPHERE_PASSWORD",
    CONFIG_ALLOW_UNVERIFIED_SSL: "VSPHERE_ALLOW_UNVERIFIED_SSL",
}
REQUIRED_KEYS = (CONFIG_SERVER, CONFIG_USER, CONFIG_PASSWORD)

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off", ""})


class ConfigSource(Protocol):
    """What `pulumi.dynamic.Config` and `pulumi.Config`-like objects (and dicts) offer."""

    def get(self, key: str) -> Any: ...


def parse_bool(value: Any, *, key: str) -> bool:
    """Parse a config/env boolean; a typo is an error naming the key, never silently False."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise VsphereError(f"{key}: expected true or false, got {value!r}")


def parse_server(server: str) -> tuple[str, int, str]:
    """Split a vCenter server setting into (host, port, protocol).

    Accepts what pulumi-vsphere accepts (`vc.example.com`, `vc.example.com:8443`, `[::1]:443`)
    and, for the simulator in tests, a URL with a scheme (`http://127.0.0.1:8989/sdk`).
    """
    text = server.strip()
    if not text:
        raise VsphereError(f"{CONFIG_SERVER} is empty")
    if "://" not in text:
        text = "https://" + text
    parts = urllib.parse.urlsplit(text)
    protocol = parts.scheme.lower()
    if protocol not in ("http", "https"):
        raise VsphereError(f"{CONFIG_SERVER}: unsupported scheme {parts.scheme!r} in {server!r}")
    host = parts.hostname
    if not host:
        raise VsphereError(f"{CONFIG_SERVER}: no host name in {server!r}")
    try:
        port = parts.port
    except ValueError as exc:
        raise VsphereError(f"{CONFIG_SERVER}: bad port in {server!r}") from exc
    if port is None:
        port = 443 if protocol == "https" else 80
    return host, port, protocol


@dataclass(frozen=True)
class VcenterConnection:
    """Where and how to log in to vCenter. The password never shows in `repr`."""

    server: str
    user: str
    password: str = field(repr=False)
    port: int = 443
    protocol: str = "https"
    verify_ssl: bool = True

    @classmethod
    def from_pulumi_config(cls, config: ConfigSource | None, env: Mapping[str, str] | None = None) -> VcenterConnection:
        """Read the `vsphere:*` stack config keys, falling back to the VSPHERE_* env vars.

        Raises VsphereError naming every missing key (and its env var) at once.
        """
        environ = os.environ if env is None else env

        def lookup(key: str) -> Any:
            value = config.get(key) if config is not None else None
            if value is None or value == "":
                value = environ.get(ENV_FALLBACKS[key])
            return None if value == "" else value

        values = {key: lookup(key) for key in ENV_FALLBACKS}
        missing = [f"{key} (or env {ENV_FALLBACKS[key]})" for key in REQUIRED_KEYS if values[key] is None]
        if missing:
            raise VsphereError(
                "vCenter connection settings missing: "
                + ", ".join(missing)
                + ". Set them with `pulumi config set vsphere:vsphereServer ...` "
                "(`--secret` for the password) or export the environment variables."
            )
        return cls.from_values(values)

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> VcenterConnection:
        """From a complete `{vsphere:* key: value}` mapping (the three required keys set)."""
        host, port, protocol = parse_server(str(values[CONFIG_SERVER]))
        unverified = values.get(CONFIG_ALLOW_UNVERIFIED_SSL)
        allow_unverified = False if unverified is None else parse_bool(unverified, key=CONFIG_ALLOW_UNVERIFIED_SSL)
        return cls(
            server=host,
            user=str(values[CONFIG_USER]),
            password=str(values[CONFIG_PASSWORD]),
            port=port,
            protocol=protocol,
            verify_ssl=not allow_unverified,
        )

    @classmethod
    def from_url(cls, url: str, *, verify_ssl: bool = True) -> VcenterConnection:
        """`http://user:pass@127.0.0.1:PORT/sdk`, as the simulator harness prints it."""
        parts = urllib.parse.urlsplit(url)
        if parts.username is None or parts.password is None:
            raise VsphereError("vCenter URL must carry user:password@")
        host, port, protocol = parse_server(f"{parts.scheme}://{parts.hostname}:{parts.port}")
        return cls(
            server=host,
            user=urllib.parse.unquote(parts.username),
            password=urllib.parse.unquote(parts.password),
            port=port,
            protocol=protocol,
            verify_ssl=verify_ssl,
        )

    @property
    def address(self) -> str:
        return f"{self.protocol}://{self.server}:{self.port}"

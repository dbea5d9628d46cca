"""Where and how to log in to vCenter: the VSPHERE_* variables of the run's role, the `vsphere:*` keys, parsing.

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


def _same(key: str, configured: Any, exported: Any) -> bool:
    if key == CONFIG_ALLOW_UNVERIFIED_SSL:
        return parse_bool(configured, key=key) == parse_bool(exported, key=ENV_FALLBACKS[key])
    return str(configured).strip() == str(exported).strip()


def _present(value: Any) -> Any:
    return None if value is None or value == "" else value


def _merged(config: ConfigSource | None, environ: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """Each `vsphere:*` key's value (the variable's where both are set), and the keys set in both
    places with different values."""
    values: dict[str, Any] = {}
    conflicts: list[str] = []
    for key, variable in ENV_FALLBACKS.items():
        configured = _present(config.get(key) if config is not None else None)
        exported = _present(environ.get(variable))
        if configured is not None and exported is not None and not _same(key, configured, exported):
            conflicts.append(key)
        values[key] = exported if exported is not None else configured
    return values, conflicts


def connection_conflicts(config: ConfigSource | None, environ: Mapping[str, str]) -> list[str]:
    """The `vsphere:*` keys the stack config and the VSPHERE_* variables set to different values.
    The program checks them before pulumi-vsphere's first lookup (issue 53 item 8): the lookups
    run with the stack config's value, our plugin's calls would not."""
    return _merged(config, environ)[1]


def conflict_message(conflicts: list[str]) -> str:
    return (
        "vCenter connection settings disagree: "
        + ", ".join(f"{key} (stack config) differs from env {ENV_FALLBACKS[key]}" for key in conflicts)
        + ". pulumi-vsphere would take the stack config's; the account and server come from the run's "
        "environment: remove the key from the stack (`pulumi config rm KEY`) or unset the variable."
    )


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
        """Read the `vsphere:*` keys and the VSPHERE_* variables; the run's role decides the account.

        A key set in one place only is taken from there. Set in both with different values, the run
        stops: pulumi-vsphere would take the stack config's (it falls back to the variable only for
        an unset key: pulumi/pulumi-vsphere provider/resources.go, and `schema.EnvDefaultFunc` in
        hashicorp/terraform-provider-vsphere vsphere/provider.go), so taking either would let our
        providers and pulumi-vsphere disagree, or a stack file outrank the environment's read-only
        account in a preview (docs/environments.md, "Credentials come by role").
        Raises VsphereError naming every conflicting or missing key (and its env var) at once.
        """
        values, conflicts = _merged(config, os.environ if env is None else env)
        if conflicts:
            raise VsphereError(conflict_message(conflicts))
        missing = [f"{key} (or env {ENV_FALLBACKS[key]})" for key in REQUIRED_KEYS if values[key] is None]
        if missing:
            raise VsphereError(
                "vCenter connection settings missing: "
                + ", ".join(missing)
                + ". Export VSPHERE_USER and VSPHERE_PASSWORD (the account of this run's role; in CI its "
                "GitHub environment's secrets) and VSPHERE_SERVER or `pulumi config set vsphere:vsphereServer ...`."
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

"""InitPkiDelivery against the vCenter simulator (issue 40 item 5): the init node's keys reach it
sealed to a key it made, and vCenter never holds one in plain text.

The provider runs as the plugin runs it (its own session, configured like the engine does). The
guest is a thread doing what the bootstrap's `receive_pki` does, with the real openssl for the
key, the certificate, the signature check (`dgst -verify`) and the decryption (`cms -decrypt`,
RSA-OAEP), and the real tar; only its guestinfo calls are a double
(docs/tests.md): `info-set` becomes a reconfigure of the VM's extraConfig, which is where vCenter
shows a value the guest set (vm-operator reads guest-set keys from `config.extraConfig`), and
`info-get` reads extraConfig. The script's own run of the same exchange, against the program's
sealing code, is tests/components/k8s/node_bootstrap/test_bootstrap_pki_handoff.py.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import subprocess
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyVmomi import vim

from components.k8s.node_bootstrap.pki_handoff import BUNDLE_MEMBERS, pki_bundle
from components.vcenter.errors import VsphereError
from components.vsphere.first_boot import asks_for_its_keys, guestinfo_extra_config, metadata_document
from components.vsphere.guestinfo_scrub import GuestinfoScrubProvider
from components.vsphere.key_handoff import ENVELOPE_KEY, HANDOFF_KEYS, RECEIVED_KEY, REQUEST_KEY, envelope_recipient
from components.vsphere.pki_delivery import DeliveryWait, InitPkiDeliveryProvider
from components.vsphere.provider_base import RetryPolicy
from tests.components.k8s.node_bootstrap.cluster_settings import (
    HANDOFF_SIGNER_PEM,
    HANDOFF_SIGNING_KEY_PEM,
    PEM_FIELDS,
    TEST_ENCRYPTION_KEYS,
    cluster_settings,
)
from tests.components.vsphere.conftest import TEMPLATE_VM
from tests.components.vsphere.test_vcsim_control_plane_keys import _readable, _reconfigure_events
from tests.components.vsphere.vm_helpers import clone, destroy, power_on, reconfigure, unique

pytestmark = pytest.mark.vcsim

FAST_RETRY = RetryPolicy(attempts=3, base_delay=0.05, max_delay=0.2, max_total=20)
FAST_WAIT = DeliveryWait(poll_seconds=0.2)
USER_DATA = "#cloud-config\nhostname: master\n"


def _pki() -> Any:
    from components.k8s.node_bootstrap import ClusterPki, ClusterSpec

    spec = ClusterSpec(**cluster_settings())
    pki = ClusterPki(
        **{name: f"-----BEGIN RSA PRIVATE KEY-----\n{name}\n-----END RSA PRIVATE KEY-----\n" for name in PEM_FIELDS},
        secrets_encryption_keys=TEST_ENCRYPTION_KEYS,
    )
    return pki_bundle(spec, pki)


BUNDLE = _pki()


def _metadata(*, asks: bool = True) -> str:
    document = metadata_document(instance_id="dev-master", hostname="master", nics=[], dns_servers=[], dns_domain="lab")
    return document if asks else document.replace('"gpucluster-key-handoff": "v1", ', "")


def _extra(vm: Any) -> dict[str, str]:
    return {str(o.key): str(o.value) for o in vm.config.extraConfig or []}


@pytest.fixture
def init_vm(find: Callable[[Any, str], Any], extended: Any) -> Iterator[Any]:
    vm = clone(find(vim.VirtualMachine, TEMPLATE_VM), unique("pki"))
    extra = guestinfo_extra_config(_metadata(), USER_DATA)
    reconfigure(vm, extraConfig=[vim.option.OptionValue(key=k, value=v) for k, v in extra.items()])
    power_on(vm)
    yield vm
    with contextlib.suppress(Exception):
        destroy(vm)


@pytest.fixture
def provider(configured: Callable[..., Any]) -> InitPkiDeliveryProvider:
    return configured(InitPkiDeliveryProvider(retry=FAST_RETRY, wait=FAST_WAIT))


def _props(vm: Any, wait_seconds: float = 30) -> dict[str, Any]:
    return {
        "vm_id": vm.config.uuid,
        "vm_name": vm.name,
        "node_name": "master",
        "bundle": base64.b64encode(BUNDLE).decode(),
        "signing_key": HANDOFF_SIGNING_KEY_PEM,
        "wait_seconds": wait_seconds,
    }


class Guest:
    """What `receive_pki` does on the node (real openssl and tar; guestinfo through vCenter)."""

    def __init__(self, vm: Any, home: Path) -> None:
        self.vm, self.home = vm, home
        self.staged: dict[str, bytes] = {}
        self.error: BaseException | None = None
        self.key = home / "handoff.key"
        self.cert = home / "handoff.crt"

    def make_key(self) -> str:
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "7", "-subj", "/CN=gpucluster-pki-handoff",
             "-keyout", str(self.key), "-out", str(self.cert)],
            check=True, capture_output=True,
        )  # fmt: skip
        der = subprocess.run(
            ["openssl", "x509", "-in", str(self.cert), "-outform", "der"], check=True, capture_output=True
        ).stdout
        return base64.b64encode(der).decode()

    def info_set(self, key: str, value: str) -> None:
        reconfigure(self.vm, extraConfig=[vim.option.OptionValue(key=key, value=value)])

    def _openssl(self, *args: str, stdin: bytes = b"") -> bytes:
        return subprocess.run(["openssl", *args], input=stdin, check=True, capture_output=True).stdout

    def _opened(self, envelope: str | None) -> bool:
        """As the script's `open_envelope`: the stack's signature checked with `dgst -verify` and the
        public key from user-data, then the certificate it names, then `cms -decrypt`; False when
        it is not for this key."""
        if not envelope:
            return False
        version, fingerprint, cms, signature = envelope.split(".")
        assert version == "v2"
        signer = self.home / "signer.pem"
        signer.write_text(HANDOFF_SIGNER_PEM)
        (self.home / "envelope.signed").write_text(f"{version}.{fingerprint}.{cms}")
        (self.home / "envelope.sig").write_bytes(base64.b64decode(signature))
        self._openssl(
            "dgst", "-sha256", "-verify", str(signer), "-signature", str(self.home / "envelope.sig"),
            str(self.home / "envelope.signed"),
        )  # fmt: skip
        mine = hashlib.sha256(base64.b64decode(self._request())).hexdigest()
        if fingerprint != mine:
            return False
        (self.home / "envelope.der").write_bytes(base64.b64decode(cms))
        self._openssl(
            "cms", "-decrypt", "-inform", "DER", "-in", str(self.home / "envelope.der"), "-inkey", str(self.key),
            "-recip", str(self.cert), "-out", str(self.home / "bundle.tgz"),
        )  # fmt: skip
        return True

    def _request(self) -> str:
        der = self._openssl("x509", "-in", str(self.cert), "-outform", "der")
        return base64.b64encode(der).decode()

    def receive(self, request: str) -> None:
        try:
            self.info_set(REQUEST_KEY, request)
            deadline = time.monotonic() + 30
            # As the script's loop: until an envelope is there and opens with this node's key (one
            # sealed to an earlier certificate does not).
            while not self._opened(_extra(self.vm).get(ENVELOPE_KEY)):
                assert time.monotonic() < deadline, "no envelope that opens"
                time.sleep(0.2)
            opened = self.home / "open"
            opened.mkdir()
            subprocess.run(
                ["tar", "-xzf", str(self.home / "bundle.tgz"), "-C", str(opened), *BUNDLE_MEMBERS], check=True
            )
            self.staged = {name: (opened / name).read_bytes() for name in BUNDLE_MEMBERS}
            self.key.unlink()
            fingerprint = hashlib.sha256(base64.b64decode(request)).hexdigest()
            self.info_set(RECEIVED_KEY, f"sha256:{fingerprint}")
        except BaseException as exc:  # reported by the test
            self.error = exc


def _bundle_members() -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(BUNDLE), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


def _deliver_with(guest: Guest, provider: InitPkiDeliveryProvider, props: dict[str, Any], request: str) -> Any:
    thread = threading.Thread(target=guest.receive, args=(request,))
    thread.start()
    try:
        return provider.create(provider.check({}, props).inputs)
    finally:
        thread.join(60)
        assert guest.error is None, guest.error


def test_the_init_node_receives_its_keys_and_vcenter_never_holds_one(
    si: Any, init_vm: Any, provider: InitPkiDeliveryProvider, tmp_path: Path
) -> None:
    guest = Guest(init_vm, tmp_path)
    created = _deliver_with(guest, provider, _props(init_vm), guest.make_key())
    assert guest.staged == _bundle_members()
    assert b"PRIVATE KEY" in guest.staged["ca.key"]
    # What a vCenter reader sees, now and in the event log: only public values and ciphertext.
    for where, text in (
        ("extraConfig", _readable(list(_extra(init_vm).values()))),
        ("events", _reconfigure_events(si, init_vm)),
    ):
        assert "PRIVATE KEY" not in text, where
        assert TEST_ENCRYPTION_KEYS["key-1"] not in text, where
    left = _extra(init_vm)
    assert ENVELOPE_KEY not in left and REQUEST_KEY not in left
    assert created.outs["certificate_fingerprint"] == left[RECEIVED_KEY]
    assert created.outs["keys_present"] == [RECEIVED_KEY]


def test_a_rerun_after_the_delivery_finds_the_answer_and_delivers_nothing_again(
    si: Any, init_vm: Any, provider: InitPkiDeliveryProvider, tmp_path: Path
) -> None:
    guest = Guest(init_vm, tmp_path)
    _deliver_with(guest, provider, _props(init_vm), guest.make_key())
    again = provider.create(provider.check({}, _props(init_vm, wait_seconds=1)).inputs)
    assert again.outs["certificate_fingerprint"] == _extra(init_vm)[RECEIVED_KEY]
    assert ENVELOPE_KEY not in _extra(init_vm)


def _fingerprint(request: str) -> str:
    return "sha256:" + hashlib.sha256(base64.b64decode(request)).hexdigest()


def test_a_second_certificate_fails_the_delivery_keys_exposed_and_nothing_is_sealed_to_it(
    si: Any, init_vm: Any, provider: InitPkiDeliveryProvider, tmp_path: Path
) -> None:
    """Issue 53 item 1: someone (a vCenter user with AdvancedConfig, a process in the guest) posts
    a certificate before the node does and gets the keys sealed to it. The node's own request,
    when it comes, is a second one: the delivery fails naming the exposure and what to rotate, and
    seals nothing to it; a re-run fails the same way (the VM is to be replaced)."""
    (tmp_path / "other").mkdir()
    other = Guest(init_vm, tmp_path / "other")
    first = other.make_key()
    other.info_set(REQUEST_KEY, first)
    (tmp_path / "node").mkdir()
    node = Guest(init_vm, tmp_path / "node")
    second = node.make_key()

    def post_later() -> None:
        time.sleep(1.0)
        node.info_set(REQUEST_KEY, second)

    thread = threading.Thread(target=post_later)
    thread.start()
    with pytest.raises(VsphereError) as failed:
        provider.create(provider.check({}, _props(init_vm)).inputs)
    thread.join(60)
    message = str(failed.value)
    assert "keys exposed: rotate" in message
    assert _fingerprint(first) in message and _fingerprint(second) in message
    for what in ("cluster CA", "front-proxy CA", "etcd CA", "service-account key", "Secrets encryption keys"):
        assert what in message
    left = _extra(init_vm)
    assert envelope_recipient(left[ENVELOPE_KEY]) == _fingerprint(first)  # none sealed to the second
    assert RECEIVED_KEY not in left
    with pytest.raises(VsphereError, match="keys exposed: rotate"):
        provider.create(provider.check({}, _props(init_vm, wait_seconds=5)).inputs)
    assert envelope_recipient(_extra(init_vm)[ENVELOPE_KEY]) == _fingerprint(first)


def test_a_request_posted_after_the_node_received_its_keys_fails_the_delivery(
    si: Any, init_vm: Any, provider: InitPkiDeliveryProvider, tmp_path: Path
) -> None:
    """The node asked, got the envelope, answered; a certificate posted before the stack saw the
    answer is still a second request: the run fails rather than counting the keys delivered."""
    guest = Guest(init_vm, tmp_path)
    request = guest.make_key()
    (tmp_path / "other").mkdir()
    other = Guest(init_vm, tmp_path / "other")
    late = other.make_key()
    original = guest.info_set

    def answer_then_someone_posts(key: str, value: str) -> None:
        if key == RECEIVED_KEY:
            other.info_set(REQUEST_KEY, late)
        original(key, value)

    guest.info_set = answer_then_someone_posts  # type: ignore[method-assign]
    thread = threading.Thread(target=guest.receive, args=(request,))
    thread.start()
    with pytest.raises(VsphereError, match="keys exposed: rotate"):
        provider.create(provider.check({}, _props(init_vm)).inputs)
    thread.join(60)


def test_the_clone_clears_handoff_keys_a_template_or_an_earlier_vm_left(
    find: Callable[[Any, str], Any], provider: InitPkiDeliveryProvider, tmp_path: Path
) -> None:
    """A VM cloned from a template that carries a request, an envelope and an answer: the
    extraConfig the clone gets (`guestinfo_extra_config`, applied before power-on) removes them,
    so a stale answer cannot pass for this VM's and the first request is its own."""
    template = clone(find(vim.VirtualMachine, TEMPLATE_VM), unique("stale"))
    try:
        guest = Guest(template, tmp_path)
        stale = {REQUEST_KEY: guest.make_key(), ENVELOPE_KEY: "v2.stale", RECEIVED_KEY: "sha256:" + "0" * 64}
        reconfigure(template, extraConfig=[vim.option.OptionValue(key=k, value=v) for k, v in stale.items()])
        assert set(HANDOFF_KEYS) <= set(_extra(template))
        vm = clone(template, unique("pki"))
        try:
            assert set(HANDOFF_KEYS) <= set(_extra(vm))  # the clone copied them
            extra = guestinfo_extra_config(_metadata(), USER_DATA)
            reconfigure(vm, extraConfig=[vim.option.OptionValue(key=k, value=v) for k, v in extra.items()])
            assert not set(HANDOFF_KEYS) & set(_extra(vm))
            assert asks_for_its_keys(_extra(vm)["guestinfo.metadata"])
        finally:
            destroy(vm)
    finally:
        destroy(template)


def test_a_node_that_never_asks_fails_the_run_naming_the_vm(init_vm: Any, provider: InitPkiDeliveryProvider) -> None:
    with pytest.raises(VsphereError, match=rf"VM {init_vm.name}: its node did not ask for its keys"):
        provider.create(provider.check({}, _props(init_vm, wait_seconds=1)).inputs)


def test_an_init_vm_made_before_the_sealed_delivery_is_left_alone(
    init_vm: Any, provider: InitPkiDeliveryProvider
) -> None:
    """An existing cluster's init VM: its metadata has no marker (the VM ignores metadata changes)."""
    extra = guestinfo_extra_config(_metadata(asks=False), USER_DATA)
    reconfigure(
        init_vm, extraConfig=[vim.option.OptionValue(key="guestinfo.metadata", value=extra["guestinfo.metadata"])]
    )
    created = provider.create(provider.check({}, _props(init_vm, wait_seconds=1)).inputs)
    assert created.outs["certificate_fingerprint"] == ""
    assert ENVELOPE_KEY not in _extra(init_vm)


def test_a_vm_that_forbids_guest_info_set_fails_at_once_naming_the_setting(
    init_vm: Any, provider: InitPkiDeliveryProvider
) -> None:
    reconfigure(init_vm, extraConfig=[vim.option.OptionValue(key="isolation.tools.setInfo.disable", value="TRUE")])
    started = time.monotonic()
    with pytest.raises(VsphereError, match=r"isolation\.tools\.setinfo\.disable = TRUE"):
        provider.create(provider.check({}, _props(init_vm, wait_seconds=600)).inputs)
    assert time.monotonic() - started < 60  # not the whole wait


def test_delete_removes_every_handoff_key(init_vm: Any, provider: InitPkiDeliveryProvider, tmp_path: Path) -> None:
    guest = Guest(init_vm, tmp_path)
    created = _deliver_with(guest, provider, _props(init_vm), guest.make_key())
    provider.delete(created.id, created.outs)
    assert not [k for k in _extra(init_vm) if k.startswith("guestinfo.gpucluster.pki.")]


def test_the_scrub_and_the_delivery_on_the_same_vm_at_once_leave_each_other_alone(
    init_vm: Any, provider: InitPkiDeliveryProvider, configured: Callable[..., Any], tmp_path: Path
) -> None:
    """`pulumi up` runs the init VM's GuestinfoScrub beside its delivery: two reconfigures of one VM,
    different keys. Neither may undo the other's (the metadata marker stays; the answer stays)."""
    scrub = configured(GuestinfoScrubProvider(retry=FAST_RETRY))
    scrubbed: list[Any] = []
    scrubber = threading.Thread(
        target=lambda: scrubbed.append(
            scrub.create({"vm_id": init_vm.config.uuid, "vm_name": init_vm.name, "node_name": "master"})
        )
    )
    guest = Guest(init_vm, tmp_path)
    request = guest.make_key()
    scrubber.start()
    created = _deliver_with(guest, provider, _props(init_vm), request)
    scrubber.join(60)
    assert scrubbed and scrubbed[0].outs["keys_present"] == []
    assert guest.staged == _bundle_members()
    left = _extra(init_vm)
    assert "guestinfo.userdata" not in left
    assert asks_for_its_keys(left["guestinfo.metadata"])
    assert left[RECEIVED_KEY] == created.outs["certificate_fingerprint"]
    assert REQUEST_KEY not in left and ENVELOPE_KEY not in left


def test_a_signing_key_that_is_not_the_stacks_ecdsa_key_fails_naming_it_and_writes_nothing(
    init_vm: Any, provider: InitPkiDeliveryProvider, tmp_path: Path
) -> None:
    assert [f.property for f in provider.check({}, {**_props(init_vm), "signing_key": "nope"}).failures] == [
        "signing_key"
    ]
    guest = Guest(init_vm, tmp_path)
    guest.info_set(REQUEST_KEY, guest.make_key())
    rsa_key = subprocess.run(
        ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    with pytest.raises(VsphereError, match=rf"VM {init_vm.name}: could not seal its keys: .*must be ECDSA P-256"):
        provider.create(provider.check({}, {**_props(init_vm), "signing_key": rsa_key}).inputs)
    assert ENVELOPE_KEY not in _extra(init_vm)

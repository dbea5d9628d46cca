"""Which extraConfig keys the guestinfo scrub removes, decided without vCenter (the simulator test,
test_vcsim_guestinfo_scrub.py, removes them from real VMs): every key the first boot writes that
carries or describes the user-data, and none of the metadata keys, which stay."""

from __future__ import annotations

from types import SimpleNamespace

from components.vsphere.first_boot import GUESTINFO_KEYS
from components.vsphere.guestinfo_scrub import secret_keys_present


def _vm(keys: tuple[str, ...]) -> SimpleNamespace:
    return SimpleNamespace(config=SimpleNamespace(extraConfig=[SimpleNamespace(key=k, value="---") for k in keys]))


def test_every_user_data_key_the_first_boot_writes_is_scrubbed_and_nothing_else() -> None:
    user_data = [key for key in GUESTINFO_KEYS if key.startswith("guestinfo.userdata")]
    assert set(user_data) == {"guestinfo.userdata", "guestinfo.userdata.encoding"}
    assert secret_keys_present(_vm(tuple(GUESTINFO_KEYS))) == user_data
    assert secret_keys_present(_vm(("guestinfo.metadata", "guestinfo.metadata.encoding"))) == []

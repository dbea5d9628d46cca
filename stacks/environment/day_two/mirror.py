"""The day-two classes of the `mirror` keys: what changing where a site's images, files, CA and
license service come from does to a running environment (classes.py holds the table)."""

from __future__ import annotations

from stacks.environment.day_two.entries import FIRST_BOOT, FIRST_BOOT_ONLY, NOTHING_LIVE, DayTwo

MIRROR_KEYS: dict[str, DayTwo] = {
    "mirror.registry": DayTwo(
        "in-place",
        "every add-on and job image is pulled from the new registry as its controller rolls it; kubeadm's "
        "imageRepository and Calico's Installation registry are in the first node's user-data, read once at its "
        "first boot: existing nodes and the running Calico keep pulling from where they did",
        "copy the images there first (`python -m stacks images STACK`), then `pulumi up`; on a live cluster move "
        "kubeadm's (`kubectl -n kube-system edit cm kubeadm-config`) and Calico's (`kubectl edit installation "
        "default`, spec.registry) by hand",
        FIRST_BOOT,
    ),
    "mirror.files": DayTwo(
        "in-place",
        "the GPU Operator's chart is read from the new base at the next `pulumi up`; Calico's manifest URL is in "
        "the first node's user-data, read once at its first boot: existing nodes keep theirs",
        "serve the same files there first (`python -m stacks images STACK --files`), then `pulumi up`",
        FIRST_BOOT,
    ),
    # The site CA and containerd's hosts.toml are first-boot files of every node (issue 42): when the
    # mirror's certificate moves to a new CA, put both CAs in caBundle until every node has the new one.
    "mirror.caBundle": FIRST_BOOT_ONLY,
    "mirror.plainHttp": FIRST_BOOT_ONLY,
    "mirror.licenseServer": NOTHING_LIVE,
}

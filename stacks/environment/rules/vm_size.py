"""Rules for VM sizes vCenter refuses.

vSphere Virtual Machine Administration, "Change the Memory Configuration": "The memory size must be a
multiple of 4 MB", and the maximum by compatibility (hardware version): 24560 GB from ESXi 7.0 U1
(version 18), 6128 GB from ESXi 6.5 (version 13) to 7.0 (17). vCenter refuses such a reconfigure or
clone (InvalidArgument on `memoryMB`) only during `pulumi up`, after other VMs are already made.
"""

from __future__ import annotations

from collections.abc import Iterator

from stacks.environment.model import Environment, NodePool
from stacks.environment.registry import Problem, rule

MEMORY_GRANULARITY_MB = 4


def max_memory_gb(hardware_version: int) -> int:
    """The largest VM memory a hardware version allows (the table above)."""
    return 24560 if hardware_version >= 18 else 6128


def _pools(env: Environment) -> list[tuple[str, NodePool]]:
    return [("controlPlane", env.control_plane), ("gpuWorkers", env.gpu_workers)]


@rule
def memory_fits_vcenter(env: Environment) -> Iterator[Problem]:
    ceiling_gb = max_memory_gb(env.vm.hardware_version)
    for pool_key, pool in _pools(env):
        memory = pool.memory_mb
        if memory % MEMORY_GRANULARITY_MB:
            lower = memory - memory % MEMORY_GRANULARITY_MB
            yield Problem(
                (pool_key, "memoryMb"),
                f"{memory} is not a multiple of 4 MB; use {lower} or {lower + MEMORY_GRANULARITY_MB} "
                "(vCenter refuses other sizes)",
            )
        if memory > ceiling_gb * 1024:
            yield Problem(
                (pool_key, "memoryMb"),
                f"{memory} MB is above the {ceiling_gb} GB a VM of hardware version {env.vm.hardware_version} "
                "may have; lower it",
            )

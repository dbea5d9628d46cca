"""Entry point Pulumi runs for `--policy-pack policy`: build the pack and serve it.

The policies themselves live in `gpucluster_policy`, importable by the tests as
`policy.gpucluster_policy`; this file only hands them to `PolicyPack`, which blocks serving the
engine's gRPC calls.
"""

from typing import TYPE_CHECKING

from pulumi_policy import EnforcementLevel, PolicyPack

if TYPE_CHECKING:  # how mypy and the tests see it
    from policy.gpucluster_policy import PACK_NAME, POLICIES
else:  # how Pulumi runs it: this folder is sys.path[0]
    from gpucluster_policy import PACK_NAME, POLICIES

PolicyPack(name=PACK_NAME, policies=POLICIES, enforcement_level=EnforcementLevel.MANDATORY)

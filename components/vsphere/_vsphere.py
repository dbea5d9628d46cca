"""Kept only so that provider pickles already in Pulumi state still load: not for new imports.

Until the vCenter I/O moved to `components.vcenter` (and the provider base to
`components.vsphere.provider_base`), every dynamic provider held a `RetryPolicy` defined here, and
the SDK pickled it by reference (`components.vsphere._vsphere.RetryPolicy`) into each resource's
`__provider` in state. The engine loads the *old* state's provider for `delete` and `refresh`, so
a stack deployed before the move needs this name to resolve. The class itself now lives in
`provider_base`; an old pickle restores into it (fields added since take their class defaults).
"""

from __future__ import annotations

from components.vsphere.provider_base import RetryPolicy

__all__ = ["RetryPolicy"]

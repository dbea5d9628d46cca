"""vCenter I/O over pyVmomi, without Pulumi: the one place that talks to vCenter.

Import from the module that does the job (this package imports nothing itself, so a caller that
needs only the pure parts, such as `inventory_model`, does not load pyVmomi):

- `errors`: `VsphereError`, the one exception every module here raises (no pyVmomi).
- `settings`: where and how to log in (`VcenterConnection`), read from the `vsphere:*` stack keys
  or the `VSPHERE_*` environment variables; the key names.
- `faults`: vim fault text, and which faults and socket errors are transient.
- `session`: a login bounded in time, logout, a per-connection session cache.
- `tasks`: `with_retries` (backoff, jitter, a wall-clock deadline) and `wait_for_task`.
- `lookups`: one-round property reads and `find_*` by name.
- `inventory_model`: the read-only inventory snapshot as plain dataclasses (no pyVmomi).
- `inventory`: reads that snapshot from vCenter.

The base class of the vSphere resource handlers lives with them
(`components/vsphere/provider_base.py`).
"""

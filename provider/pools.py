"""The plugin's two worker pools, and what `cancel` does to them.

The engine calls Check (and Diff, unless `PULUMI_PARALLEL_DIFF` is set) one resource at a time on
its step-generation loop and waits for the answer before it looks at the next registration
(pulumi/pulumi pkg/resource/deploy/step_generator.go, `GenerateSteps` -> `checkInputs`/`diff`;
deployment_executor.go runs that loop on one goroutine). If those calls waited for a thread behind
hundreds of creates that each block on vCenter for minutes, every registration of the stack,
VMs included, would wait too. So they get a pool of their own (`STEP_LOOP_THREADS`): our Check
and Diff handlers are computations on the inputs, a few threads are enough, and they never queue
behind the long operations of `operations`. Two read vCenter there, as an early warning a later
operation repeats (`TemplateReplica.diff`: the copy's drift; `HostGraphicsMode.check` with
manage=false: the host's mode): each read is bounded and skipped past its budget
(components/vsphere/step_loop_reads.py; tests/provider/test_step_loop.py holds every such Check
and Diff under a second with vCenter answering 3 s late).

`cancel` (the engine's Cancel: `pulumi up` interrupted once) stops the queued operations and lets
the running ones end on their own: a pyVmomi call in flight cannot be interrupted safely (its
task runs on in vCenter either way), and an operation that ends reports its outcome to the engine,
which records it. Queued ones never start; their calls fail with `Cancelled`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

STEP_LOOP_THREADS = 4
"""Threads for Check and Diff: handlers of a few milliseconds each (a bounded vCenter read at most); the engine sends one at
a time per step loop (more only with PULUMI_PARALLEL_DIFF)."""


class Cancelled(RuntimeError):
    """An operation asked for after the engine cancelled the update."""


class Pools:
    def __init__(self, operations: int) -> None:
        self.size = operations
        self.operations = ThreadPoolExecutor(operations, thread_name_prefix="gpucluster")
        """Create, Read, Update, Delete and the switch batches: they block on vCenter or Kubernetes."""
        self.step_loop = ThreadPoolExecutor(STEP_LOOP_THREADS, thread_name_prefix="gpucluster-check")
        """Check and Diff, never behind `operations`."""
        self.cancelled = False

    def resized(self, operations: int) -> Pools:
        """Pools with another operations size; these end once their running work is done."""
        if operations == self.size:
            return self
        fresh = Pools(operations)
        self.operations.shutdown(wait=False)
        self.step_loop.shutdown(wait=False)
        return fresh

    def cancel(self) -> None:
        """Drop the queued operations (their futures are cancelled); running ones finish."""
        self.cancelled = True
        self.operations.shutdown(wait=False, cancel_futures=True)

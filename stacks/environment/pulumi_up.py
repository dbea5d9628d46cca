"""The `pulumiUp` settings: how the deploy workflow runs `pulumi up` for this stack.

The deployment-time estimate (`python -m stacks plan`, docs/deployment-time.md) holds only for the
engine settings it assumes; these keys make the workflow run with exactly those
(`python -m stacks deploy-settings`, .github/workflows/deploy.yml).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from stacks.environment.base import Model


class PulumiUpSettings(Model):
    parallel: int | None = Field(default=None, ge=1, le=100_000)
    """`pulumi up --parallel` in the deploy workflow. Default: the plan's width (the most
    operations that can run at once; `python -m stacks plan` prints it), never below the CLI's own
    default of 4 per runner CPU. The CLI's default alone (8 on a 2-CPU runner) keeps a large stack
    hours from its estimate."""
    runner_cpus: int = Field(default=2, ge=1, le=1024)
    """CPUs of the machine that runs `pulumi up` (the deploy jobs' runner): the CLI's default
    `--parallel` and the gpucluster plugin's throughput depend on it. Default 2, GitHub's hosted
    runners for private repositories; a self-hosted runner says its own."""
    backend: Literal["file", "s3", "cloud"] = "s3"
    """Where the stack's state lives, for the estimate: `file://`, an S3-compatible bucket, or
    Pulumi Cloud (which journals each step). Default s3, the workflow's self-managed backend."""

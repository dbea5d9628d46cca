"""The `deploy-settings` command: the engine settings the deploy workflow runs `pulumi up` with."""

from stacks.tools.deploy_settings.command import register

__all__ = ["register"]

"""The vCenter simulator serving what a stack file names (`python -m stacks.tools.simulator STACK`, scripts/simulator.sh)."""

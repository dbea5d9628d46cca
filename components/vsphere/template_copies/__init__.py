"""Copies of the GPU template spread over the hosts, so large pools clone from many sources: the plan, one copy, and the component."""

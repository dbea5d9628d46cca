"""The CrossGuard policy pack (`pulumi preview --policy-pack policy`).

This file only makes `policy` an ordinary package for the tests and mypy; Pulumi runs the folder
with `runpy.run_path`, which ignores it and imports `gpucluster_policy` from the folder itself.
"""

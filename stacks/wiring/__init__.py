"""The program's wiring: from a validated environment to typed component arguments.

Creates no resources; `__main__.py` builds every component from what these functions return.
"""

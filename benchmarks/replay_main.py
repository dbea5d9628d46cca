"""The baseline's program: registers the records it is handed, and nothing else.

Run by `runpy` as `__main__` (`benchmarks.baseline.replay_program`), the way the plan runs the
project's `__main__.py`; `RECORDS` and `TYPED` come in through runpy's `init_globals`.
"""

from benchmarks.baseline import register_records

register_records(RECORDS, typed=TYPED)  # type: ignore[name-defined]  # noqa: F821

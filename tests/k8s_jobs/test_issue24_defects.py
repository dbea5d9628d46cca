"""Issue 24's defects 6-10 (training jobs and `stacks verify`), each with a test that failed on the
code before its fix (the failure line is quoted in the commit message)."""

from __future__ import annotations

from stacks.tools.verify_logs import peak_bus_bandwidth

# 10. The nccl-tests result-row regex spanned lines: `\s` under MULTILINE matches a newline.

HEADER = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"


def test_a_result_row_broken_across_lines_is_not_read() -> None:
    # Output of two ranks interleaved (or a row cut by a line wrap): the first half of a row on
    # one line, the timings on the next. Read across the newline it would claim 17.83 GB/s.
    broken = HEADER + "   268435456      67108864     float     sum      -1\n   22588.1   11.88   17.83      0\n"
    assert peak_bus_bandwidth(broken) is None


def test_a_row_takes_no_in_place_figures_from_the_next_line() -> None:
    # An out-of-place-only row followed by a line of numbers: the in-place columns are not there.
    row = HEADER + "        1024           256     float     sum      -1    70.31    0.01    0.02      0\n"
    assert peak_bus_bandwidth(row + "   22590.2   11.88   17.83\n") == 0.02

"""The flow lab for every test module here: a fresh `Lab` per test, torn down whatever happens.

Each module keeps its own `nft` fixture, which names the real programs it needs (root, `ip`, `nft`,
and `bridge` or `curl` where its lab uses them) and skips, or fails under CI, without them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.flows.network_lab import Lab


@pytest.fixture
def lab(nft: str, tmp_path: Path) -> Iterator[Lab]:
    made = Lab(nft, tmp_path)
    try:
        yield made
    finally:
        made.close()

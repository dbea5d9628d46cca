"""Golden user-data: the whole `#cloud-config` of one node per role, from a fixed cluster
(`golden_cases`), compared byte for byte with the documents committed under golden/.

A change to what nodes receive shows up in review as a diff of these files. This run only reads
them; to accept a change on purpose, rewrite them with the separate command in `golden_cases` and
commit the diff with the change that caused it.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest

from tests.components.k8s.node_bootstrap import golden_cases
from tests.components.k8s.node_bootstrap.golden_cases import CASES, REGENERATE, golden_path, render

GOLDEN = golden_cases.GOLDEN


@pytest.mark.parametrize("case", sorted(CASES))
def test_user_data_matches_the_golden_document(case: str) -> None:
    rendered = render(case)
    golden = golden_path(case, GOLDEN)
    assert golden.exists(), f"{golden} is missing: write it with `{REGENERATE}` and review it"
    assert rendered == golden.read_text(), (
        f"{case}: the user-data differs from {golden.name}; if the change is intended, rewrite the files with "
        f"`{REGENERATE}` and commit the diff"
    )


def test_no_setting_of_the_test_run_rewrites_a_golden_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old switch (GPUCLUSTER_UPDATE_GOLDEN=1) made the run write the file it then compared
    against, so it passed whatever was rendered."""
    copy = tmp_path / "golden"
    shutil.copytree(GOLDEN, copy)
    stale = golden_path("gpu-worker", copy)
    stale.write_text(stale.read_text() + "# stale\n")
    monkeypatch.setenv("GPUCLUSTER_UPDATE_GOLDEN", "1")
    module = importlib.reload(sys.modules[__name__])  # reads the environment anew, as a fresh run would
    monkeypatch.setattr(module, "GOLDEN", copy)
    monkeypatch.setattr(golden_cases, "GOLDEN", copy)
    with pytest.raises(AssertionError, match="differs from gpu-worker"):
        module.test_user_data_matches_the_golden_document("gpu-worker")
    assert stale.read_text().endswith("# stale\n")

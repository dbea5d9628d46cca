"""What `python -m stacks plan` writes besides resources.json: the picture and the manifest folder.

Run as a user runs them (a child process); a refusal is one line, exit 2, and comes before the
program runs (the output folder is not even created).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from stacks.tools.plan.command import MANIFEST_INDEX
from tests.stack_fixtures import fixture_project_dir

ROOT = Path(__file__).resolve().parents[4]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
needs_graphviz = pytest.mark.skipif(
    shutil.which("dot") is None and os.environ.get("CI") != "true",
    reason="Graphviz's `dot` is not installed (scripts/setup.sh installs it; CI fails instead of skipping)",
)


def plan(*args: str | Path, path: str | None = None, stack: str = "dev") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "stacks", "plan", stack, *map(str, args)],
        cwd=fixture_project_dir(),
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def refused_before_planning(result: subprocess.CompletedProcess[str], out: Path) -> list[str]:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert result.returncode == 2, result.stdout
    assert not (out / "resources.json").exists(), "the program ran before the refusal"
    return result.stderr.splitlines()


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One dev plan with a PNG picture, its parent folder not there yet."""
    out = tmp_path_factory.mktemp("drawn")
    if shutil.which("dot") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("Graphviz's `dot` is missing: scripts/setup.sh installs it")
        pytest.skip("Graphviz's `dot` is not installed")
    result = plan("--out", out / "plan", "--graph", out / "pictures" / "dev.png")
    assert result.returncode == 0, result.stderr
    return out


def test_png_is_a_png(drawn: Path) -> None:
    data = (drawn / "pictures" / "dev.png").read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 200 and height > 100


@needs_graphviz
def test_svg_is_svg(tmp_path: Path) -> None:
    result = plan("--out", tmp_path, "--graph", tmp_path / "g.svg")
    assert result.returncode == 0, result.stderr
    assert "<svg" in (tmp_path / "g.svg").read_text()


@pytest.mark.parametrize("name", ["g.jpg", "graph", "g.pdf"])
def test_a_format_it_cannot_draw_is_refused_before_planning(tmp_path: Path, name: str) -> None:
    lines = refused_before_planning(plan("--out", tmp_path / "out", "--graph", tmp_path / name), tmp_path / "out")
    assert len(lines) == 1
    assert lines[0].startswith(f"error: --graph {tmp_path / name}: cannot draw a ")
    assert "FILE.dot, FILE.svg or FILE.png" in lines[0]


@pytest.mark.parametrize("name", ["g.svg", "g.png"])
def test_svg_or_png_without_graphviz_is_refused_before_planning(tmp_path: Path, name: str) -> None:
    no_graphviz = tmp_path / "bin"
    no_graphviz.mkdir()
    out = tmp_path / "out"
    lines = refused_before_planning(plan("--out", out, "--graph", tmp_path / name, path=str(no_graphviz)), out)
    kind = name.rsplit(".", 1)[1].upper()
    assert lines == [
        f"error: --graph {tmp_path / name}: drawing {kind} needs Graphviz's `dot` (apt-get install graphviz); "
        "or ask for a .dot file"
    ]


def _dot(out: Path) -> str:
    result = plan("--out", out, "--graph", out / "sub" / "g.dot", "--graph-order")
    assert result.returncode == 0, result.stderr
    return (out / "sub" / "g.dot").read_text()


@pytest.fixture(scope="module")
def dot_text(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _dot(tmp_path_factory.mktemp("dot"))


BOX = re.compile(r'^  (n\d+) \[label="([^"]+)"(, [^\]]*)?\];$', re.MULTILINE)
ARROW = re.compile(r"^  (n\d+) -> (n\d+)( \[[^\]]*\])?;$", re.MULTILINE)


def _boxes(dot: str) -> dict[str, str]:
    """Box id -> its name and type (the label's first two lines; a node pool's says how many VMs)."""
    return {box: "\\n".join(label.split("\\n")[:2]).split(":")[0] for box, label, _ in BOX.findall(dot)}


def _edges(dot: str, *, critical: bool = False) -> set[tuple[str, str]]:
    """(created first, waits for it) by name and type; `critical`: only the critical path's arrows."""
    boxes = _boxes(dot)
    return {(boxes[a], boxes[b]) for a, b, style in ARROW.findall(dot) if not critical or "penwidth=3" in style}


def test_arrows_go_in_deployment_order_between_components_a_user_recognises(dot_text: str) -> None:
    edges = _edges(dot_text)
    # The MPIJobs' ConfigGroups wait on the operator: drawn as MpiOperator -> TrainingJobs.
    assert ("mpi-operator\\nMpiOperator", "training\\nTrainingJobs") in edges
    assert ("rdma\\nRdmaFabric", "gpu-workers\\nNodePool") in edges
    assert ("vm-folder\\nFolder", "control-plane\\nNodePool") in edges
    # No anonymous ConfigGroup boxes: every box is one of ours or a top-level resource.
    kinds = {name.split("\\n")[1] for name in _boxes(dot_text).values()}
    assert "ConfigGroup" not in kinds and "ConfigFile" not in kinds


def test_the_legend_says_which_way_an_arrow_points(dot_text: str) -> None:
    assert 'legend_a -> legend_b [label="B waits for A"];' in dot_text
    assert 'legend_b -> legend_c [label="critical path", ' in dot_text


def test_the_critical_path_is_drawn_bold_and_red_from_clone_to_init_to_the_workers_joins(dot_text: str) -> None:
    """Dev's longest path: the folder, the control plane's clone, kubeadm init, the join token, then
    a worker's join, which `pulumi up` waits for (its NodeJoined: two minutes of boot and join,
    longer than the add-ons' minute after the API answers)."""
    assert _edges(dot_text, critical=True) == {
        ("vm-folder\\nFolder", "control-plane\\nNodePool"),
        ("control-plane\\nNodePool", "api-server-ready\\nApiServerReady"),
        ("api-server-ready\\nApiServerReady", "join-token\\nJoinToken"),
        ("join-token\\nJoinToken", "gpu-workers\\nNodePool"),
    }


@pytest.fixture(scope="module")
def prod_dot(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("prod")
    result = plan("--out", out, "--graph", out / "prod.dot", "--graph-order", stack="prod")
    assert result.returncode == 0, result.stderr
    return (out / "prod.dot").read_text()


def test_prods_picture_folds_each_nodes_plumbing_into_its_pool(prod_dot: str) -> None:
    """19 nodes, each with a gate, generation, settle, join wait, guestinfo scrub and a drain or etcd guard: folded, prod is a
    dozen boxes, not ~90, and a few dozen arrows, not ~200."""
    boxes, arrows = _boxes(prod_dot), ARROW.findall(prod_dot)
    assert len(boxes) < 20 and len(arrows) < 30, (len(boxes), len(arrows))
    assert not [name for name in boxes.values() if name.startswith(("rollout-", "drain-", "member-"))]
    labels = dict((box, label) for box, label, _ in BOX.findall(prod_dot))
    [workers] = [label for label in labels.values() if label.startswith("gpu-workers\\n")]
    assert (
        workers
        == "gpu-workers\\nNodePool: 16 VMs\\n+ per node: drain, generation, guestinfo scrub, join wait, rollout gate, settle"
    )
    [control_plane] = [label for label in labels.values() if label.startswith("control-plane\\n")]
    assert "NodePool: 3 VMs" in control_plane and "etcd member" in control_plane


def test_prods_arrows_run_one_way_and_its_critical_path_is_marked(prod_dot: str) -> None:
    edges = _edges(prod_dot)
    # Deployment order has no cycle: boxes peel off from those nothing waits before.
    remaining = set(_boxes(prod_dot).values())
    while remaining:
        first = {box for box in remaining if not any(a in remaining and b == box for a, b in edges)}
        assert first, f"a cycle among {sorted(remaining)}"
        remaining -= first
    # Prod's full clones queue on the template host: the control plane's, then the workers'.
    critical = _edges(prod_dot, critical=True)
    assert ("vm-folder\\nFolder", "control-plane\\nNodePool") in critical
    assert ("control-plane\\nNodePool", "gpu-workers\\nNodePool") in critical
    assert 'style=dashed, label="queued for capacity"' in prod_dot


def test_graph_detail_draws_every_nodes_plumbing(tmp_path: Path) -> None:
    result = plan("--out", tmp_path, "--graph", tmp_path / "detail.dot", "--graph-detail", stack="prod")
    assert result.returncode == 0, result.stderr
    names = set(_boxes((tmp_path / "detail.dot").read_text()).values())
    assert "rollout-gate-worker-16\\nRolloutGate" in names and "member-cp-2\\nControlPlaneMember" in names


@needs_graphviz
def test_prods_png_fits_one_screen(tmp_path: Path) -> None:
    """Drawn at Graphviz's 96 dpi: no taller than a laptop screen, no wider than two."""
    result = plan("--out", tmp_path, "--graph", tmp_path / "prod.png", "--graph-order", stack="prod")
    assert result.returncode == 0, result.stderr
    data = (tmp_path / "prod.png").read_bytes()
    width, height = struct.unpack(">II", data[16:24])
    assert height <= 1080 and width <= 2 * 1920, (width, height)


def test_the_picture_is_the_same_every_run(dot_text: str, tmp_path: Path) -> None:
    assert _dot(tmp_path) == dot_text


def test_plan_refuses_a_manifest_folder_it_did_not_write(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    mine = manifests / "my-notes.yaml"
    mine.write_text("keep: me\n")
    lines = refused_before_planning(plan("--out", tmp_path), tmp_path)
    assert len(lines) == 1 and "holds 1 file(s) no plan wrote (my-notes.yaml)" in lines[0]
    assert mine.read_text() == "keep: me\n"


def test_a_re_plan_replaces_only_the_previous_plans_manifests(tmp_path: Path) -> None:
    assert plan("--out", tmp_path).returncode == 0
    manifests = tmp_path / "manifests"
    written = sorted(p.name for p in manifests.iterdir())
    assert MANIFEST_INDEX in written
    # A manifest the previous plan wrote and this one no longer does goes; the rest is rewritten.
    (manifests / "retired-group.yaml").write_text("old: plan\n")
    with (manifests / MANIFEST_INDEX).open("a") as index:
        index.write("retired-group.yaml\n")
    again = plan("--out", tmp_path)
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in manifests.iterdir()) == written


def test_a_plan_folder_from_before_the_index_is_still_a_plan(tmp_path: Path) -> None:
    assert plan("--out", tmp_path).returncode == 0
    (tmp_path / "manifests" / MANIFEST_INDEX).unlink()  # as an older plan left it
    again = plan("--out", tmp_path)
    assert again.returncode == 0, again.stderr


# --- one resource count (issue 25, item 5) -------------------------------------------------------------


def test_text_and_json_give_one_resource_count(tmp_path: Path) -> None:
    """A reviewer comparing the printed tree with `--json` must not find two different totals."""
    text = plan("--out", tmp_path / "text")
    as_json = plan("--out", tmp_path / "json", "--json")
    assert text.returncode == 0 and as_json.returncode == 0, text.stderr + as_json.stderr
    document = json.loads(as_json.stdout)
    match = re.search(r"^total: (\d+) resources \((\d+) custom resources \+ (\d+) components\)", text.stdout, re.M)
    assert match, text.stdout[-2000:]
    total, custom, components = map(int, match.groups())
    assert document["resources"] == total == custom + components
    assert document["resourceCounts"] == {"total": total, "custom": custom, "components": components}
    # and the line says what it leaves out, so nobody expects `pulumi preview` to print the same number
    assert "not counted" in match.string[match.start() : match.string.index("\n", match.start())]

"""The bad-input corpus: every broken stack file ends in exit status 2 and one line per problem,
each line starting with the key path the file's `# expect:` header names. No tracebacks.

`# expect: {file}` stands for the path given to `--file` (problems with the file itself, such as
broken YAML, are reported against the file). See tests/stacks/environment/corpus/README.md.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from stacks.cli import main
from stacks.environment import rules
from stacks.environment.loader import ENVIRONMENT_KEY, InvalidEnvironment, read_stack_file
from stacks.environment.model import Environment
from tests.stack_fixtures import fixture_stack

CORPUS = Path(__file__).resolve().parent / "corpus" / "broken"
FILES = sorted(CORPUS.glob("*.yaml"))
_EXPECT = re.compile(r"^# expect: (\S+)\s*$", re.MULTILINE)

Cli = Callable[..., subprocess.CompletedProcess[str]]


def expected_paths(path: Path) -> list[str]:
    return [e.replace("{file}", str(path)) for e in _EXPECT.findall(path.read_text())]


def test_corpus_is_large_and_every_file_says_what_it_expects() -> None:
    assert len(FILES) >= 30
    for path in FILES:
        assert expected_paths(path), f"{path.name} has no `# expect:` header"
    bodies = [path.read_bytes() for path in FILES]
    assert len(set(bodies)) == len(bodies), "two corpus files are identical"


def validate_in_process(path: Path, capsys: pytest.CaptureFixture[str]) -> subprocess.CompletedProcess[str]:
    """`python -m stacks validate corpus --file PATH` run by the CLI's own `main` in this process:
    the same parser, command and error handling (`stacks/__main__.py` adds only the check for a
    missing virtualenv), without a second interpreter's start per file. An exception the CLI lets
    through fails the test as a traceback would; tests/stacks/test_cli.py runs the child process."""
    capsys.readouterr()
    returncode = main(["validate", "corpus", "--file", str(path)])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["python", "-m", "stacks"], returncode, out, err)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_broken_file_is_reported_at_its_key_path(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = validate_in_process(path, capsys)
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    assert result.returncode == 2, output
    lines = result.stderr.splitlines()
    assert lines[-1] == f"{len(lines) - 1} problem(s) found"
    expected = expected_paths(path)
    for key_path in expected:
        matching = [line for line in lines if line.startswith(f"{key_path}: ")]
        assert matching, f"no stderr line starts with {key_path!r}:\n{result.stderr}"
        for line in matching:
            assert line[len(key_path) + 2 :].strip(), f"empty message: {line!r}"
    others = [line for line in lines[:-1] if not any(line.startswith(f"{e}: ") for e in expected)]
    assert not others, f"{path.name} has drifted from Pulumi.dev.yaml: it breaks more than its `# expect:` lines"
    assert result.stdout == ""


def _rules_triggered_by(path: Path) -> set[str]:
    """Names of the cross-field rules that fire on a corpus file whose fields are all valid."""
    try:
        view = read_stack_file(path)
    except InvalidEnvironment:
        return set()
    raw = view.values.get(ENVIRONMENT_KEY)
    if not isinstance(raw, dict):
        return set()
    try:
        env = Environment.model_validate(raw)
    except ValueError:
        return set()
    return {rule.__name__ for rule in rules.RULES if list(rule(env))}


def test_every_cross_field_rule_has_a_corpus_file() -> None:
    covered = set().union(*(_rules_triggered_by(path) for path in FILES))
    missing = {rule.__name__ for rule in rules.RULES} - covered
    assert not missing, f"add a tests/stacks/environment/corpus/broken file that breaks: {sorted(missing)}"


def _with_edits(dev_text: str, *edits: tuple[str, str]) -> str:
    for old, new in edits:
        assert dev_text.count(old) == 1, old
        dev_text = dev_text.replace(old, new)
    return dev_text


FOUR_MISTAKES = {
    # Field-level mistakes: pydantic reports them all, plus the config-key check beside them.
    "fields": (
        [
            (
                '  vsphere:allowUnverifiedSsl: "true"\n',
                '  vsphere:allowUnverifiedSsl: "true"\n  vsphere:password: hunter2\n',
            ),
            ("      vlanId: 0\n", "      vlanId: 5000\n"),
            ("{name: worker-3,", "{name: Worker-3,"),
            (
                "        enabled: false\n      fabricCheck:\n",
                "        enabled: false\n        gpus: 2\n      fabricCheck:\n",
            ),
        ],
        [
            "vsphere:password",
            f"{ENVIRONMENT_KEY}.rdmaNetwork.vlanId",
            f"{ENVIRONMENT_KEY}.gpuWorkers.nodes[2].name",
            f"{ENVIRONMENT_KEY}.jobs.sample.gpus",
        ],
    ),
    # Cross-field mistakes: every rule runs, and the secrets check runs after them.
    "cross-field": (
        [
            ("rdmaIp: 192.168.0.52", "rdmaIp: 192.168.7.52"),
            (
                "{name: esxi-04.lab.example.com, rdmaVmnics: [vmnic4]",
                "{name: esxi-04.lab.example.com, rdmaVmnics: [vmnic4, vmnic5]",
            ),
            ("      templateSnapshot: base\n", ""),
            ("      mode: bootstrap\n", "      mode: existing\n"),
        ],
        [
            f"{ENVIRONMENT_KEY}.gpuWorkers.nodes[worker-2].rdmaIp",
            f"{ENVIRONMENT_KEY}.hosts[3].rdmaVmnics",
            f"{ENVIRONMENT_KEY}.vcenter.templateSnapshot",
            "vsphere-gpu-cluster:kubeconfig",
        ],
    ),
}


@pytest.mark.parametrize("kind", FOUR_MISTAKES)
def test_four_unrelated_mistakes_are_all_reported_in_one_run(cli: Cli, root: Path, tmp_path: Path, kind: str) -> None:
    edits, expected = FOUR_MISTAKES[kind]
    stack = tmp_path / "Pulumi.four.yaml"
    stack.write_text(_with_edits((fixture_stack("dev")).read_text(), *edits))
    assert yaml.safe_load(stack.read_text())["config"]  # still a well-formed stack file

    result = cli("validate", "four", "--file", stack)

    assert result.returncode == 2
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stderr.splitlines()
    reported = [line.split(": ", 1)[0] for line in lines[:-1]]
    assert sorted(reported) == sorted(expected)
    assert lines[-1] == "4 problem(s) found"

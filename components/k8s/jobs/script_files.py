"""Scripts the jobs run that are not in their images, shipped as a ConfigMap mounted read-only.

The files live beside this module in `files/` as real files (linted and tested as such); a job
renders the ConfigMap holding the ones it needs and mounts it at `SCRIPTS_DIR`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

FILES_DIR = Path(__file__).resolve().parent / "files"
SCRIPTS_DIR = "/opt/gpucluster"
"""Where the scripts appear inside the pods."""
VOLUME = "gpucluster-scripts"


def script_text(name: str) -> str:
    return (FILES_DIR / name).read_text()


def scripts_configmap(*, name: str, namespace: str, labels: Mapping[str, str], files: Sequence[str]) -> dict[str, Any]:
    """A ConfigMap with each named file of `files/` under its own name."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "data": {file: script_text(file) for file in files},
    }


def scripts_volume(configmap: str) -> dict[str, Any]:
    # 0555: the scripts are run directly or by an interpreter, never written.
    return {"name": VOLUME, "configMap": {"name": configmap, "defaultMode": 0o555}}


def scripts_mount() -> dict[str, Any]:
    return {"name": VOLUME, "mountPath": SCRIPTS_DIR, "readOnly": True}

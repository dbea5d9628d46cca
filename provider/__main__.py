"""Entry point of the gpucluster plugin: `python provider/ <engine address>` (what the Python
language host runs for PulumiPlugin.yaml; docs/deploy.md). It prints the port it serves on, as
every plugin does, and serves until the engine ends it.

Run as a folder, Python puts `provider/` itself first on sys.path; the repository root goes there
instead, so `provider` and `components` import as packages (a `kubernetes` or `vsphere` folder
inside the plugin must never shadow a library).
"""

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from provider.main import main  # noqa: E402  (after the path fix above)

main(sys.argv[1:])

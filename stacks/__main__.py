"""`python -m stacks`: the offline companion of the Pulumi CLI."""

import sys

from stacks.tools.cli import main

sys.exit(main())

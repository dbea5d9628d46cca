"""`python -m stacks.tools.simulator STACK`: serve a simulated vCenter for the stack file."""

import sys

from stacks.tools.simulator.command import main

sys.exit(main())

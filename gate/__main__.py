"""`python -m gate` runs the proofgate CLI."""

import sys

from gate.cli import main

sys.exit(main())

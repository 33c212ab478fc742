"""`python -m gate` runs the proofgate CLI."""

import sys

from gate.cli import main
from gate.signals import sigterm_raises_interrupt

sigterm_raises_interrupt()
sys.exit(main())

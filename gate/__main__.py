"""`python -m gate` runs the proofgate CLI."""

import sys

from gate.faces.cli import main
from gate.util.signals import sigterm_raises_interrupt

sigterm_raises_interrupt()
sys.exit(main())

"""`python -m gate` runs the proofgate CLI (its `main` handles SIGTERM as Ctrl-C, as the
`proofgate` console script does)."""

import sys

from gate.faces.cli import main

sys.exit(main())

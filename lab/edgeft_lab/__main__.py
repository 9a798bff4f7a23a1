"""`python -m edgeft_lab`: the lab CLI (bin/edgeft-lab runs this)."""

import sys

from .cli import main

sys.exit(main())

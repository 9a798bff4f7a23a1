"""`python -m edgeft_demo`: the demo (bin/edgeft-demo runs this)."""

import sys

from .cli import main

sys.exit(main())

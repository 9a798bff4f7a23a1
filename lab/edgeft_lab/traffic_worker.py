"""Entry point of a traffic worker process: `python -m edgeft_lab.traffic_worker FD` (see traffic_proc)."""

import sys

from .traffic_proc import child_main

if __name__ == "__main__":
    child_main(int(sys.argv[1]))

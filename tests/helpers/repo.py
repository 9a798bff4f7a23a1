"""Where the checkout is, for tests that run its launchers, playbooks and roles by path."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"

"""The fault schedule of the demo: a ToR that dies silently (links up, forwarding nothing),
is then powered off, and finally powered back on, as an operator would handle it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from edgeft_lab import Fault, Lab


@dataclass(frozen=True)
class Phase:
    """Applied at the phase's start; lasts `seconds` (the last phase: until the job ends)."""

    name: str
    kind: str  # "fault" or "repair" (record.Fault.kind)
    what: str
    apply: Callable[[Lab], object]
    seconds: float | None


def tor_failure(switch: str, silent_s: float, off_s: float) -> list[Phase]:
    def power_off(lab: Lab) -> None:
        lab.repair(Fault("silent", switch=switch))  # off is off: the silence goes with the power
        lab.power_off(switch)

    return [
        Phase("silent", "fault", f"{switch} forwards nothing, its links stay up",
              lambda lab: lab.silence(switch), silent_s),
        Phase("power-off", "fault", f"{switch} powered off: its hosts lose carrier",
              power_off, off_s),
        Phase("power-on", "repair", f"{switch} powered on, forwarding again",
              lambda lab: lab.repair(Fault("power-off", switch=switch)), None),
    ]

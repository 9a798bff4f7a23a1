# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Judgement of one thing (a path to a peer on a plane, or a plane's link).

Pure logic on CLOCK_MONOTONIC nanoseconds, no I/O, so every rule is unit
tested. Observations (alive/dead) come from probes or carrier events; the
judgement (up/down) is what the data path is told:

- down at once when the thing is observed dead (the caller decides when that
  is allowed to move traffic);
- up again only after it has been alive, without a break, for the hold-down,
  and while flap dampening does not suppress it. So a flapping thing fails
  over once and stays failed over: at most one failover per hold-down.
"""

from __future__ import annotations

import math

UP = "up"
DOWN = "down"


class Dampening:
    """Route-flap-dampening style penalty (RFC 2439 terms, ms time scale).

    Every observed failure adds `penalty`; the total halves every
    `half_life_ms`. Above `suppress` the thing is suppressed (no failback),
    until the penalty decays below `reuse`. The total is capped so that a
    thing that stops flapping is trusted again within `max_suppress_ms`.
    """

    def __init__(self, enabled=True, penalty=1000, suppress=2000, reuse=750, half_life_ms=5000, max_suppress_ms=20000):
        self.enabled = enabled
        self.step = penalty
        self.suppress_at = suppress
        self.reuse_at = reuse
        self.half_life_ns = half_life_ms * 1000000
        self.ceiling = reuse * 2.0 ** (max_suppress_ms / float(half_life_ms))
        self._value = 0.0
        self._stamp = 0
        self._suppressed = False

    def penalty(self, now: int) -> float:
        if not self._value:
            return 0.0
        return self._value * math.pow(0.5, max(0, now - self._stamp) / float(self.half_life_ns))

    def failed(self, now: int) -> None:
        """Record one failure (a link or path that went dead)."""
        if not self.enabled:
            return
        self._value = min(self.penalty(now) + self.step, self.ceiling)
        self._stamp = now
        if self._value > self.suppress_at:
            self._suppressed = True

    def suppressed(self, now: int) -> bool:
        if self._suppressed and self.penalty(now) < self.reuse_at:
            self._suppressed = False
        return self._suppressed

    def reuse_in_ns(self, now: int) -> int:
        """How long until the penalty decays below reuse (0 when not suppressed)."""
        if not self.suppressed(now):
            return 0
        return int(self.half_life_ns * math.log(self.penalty(now) / self.reuse_at, 2)) + 1


class Judge:
    """Observed liveness, judged state, hold-down and dampening of one thing."""

    def __init__(self, up: bool, hold_down_ns: int, dampening: Dampening, now: int, alive: bool = None):
        self.up = up
        self.alive = up if alive is None else alive
        self.alive_since = now if self.alive else None
        self.hold_down_ns = hold_down_ns
        self.damp = dampening
        self.changed_ns = now

    def observe(self, alive: bool, now: int) -> bool:
        """Record an observation; True when it changed the observed state."""
        if alive == self.alive:
            return False
        self.alive = alive
        if alive:
            self.alive_since = now
        else:
            self.alive_since = None
            self.damp.failed(now)
        return True

    def fail(self, now: int) -> bool:
        """Judge down (the caller saw it dead and may move traffic); True if it was up."""
        if not self.up:
            return False
        self.up = False
        self.changed_ns = now
        return True

    def stable_for(self, now: int) -> int:
        return now - self.alive_since if self.alive else 0

    def ready_to_recover(self, now: int) -> bool:
        return (not self.up and self.alive and self.stable_for(now) >= self.hold_down_ns
                and not self.damp.suppressed(now))

    def recover(self, now: int) -> bool:
        """Judge up if the hold-down passed and dampening allows; True if it did."""
        if not self.ready_to_recover(now):
            return False
        self.up = True
        self.changed_ns = now
        return True

    def state(self) -> str:
        return UP if self.up else DOWN

# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A hashed timer wheel: O(1) schedule and cancel for thousands of probe timers.

Every (peer, plane) path has a timer that fires once per probe interval; a
heap would pay log(n) per reschedule, a wheel pays a list append. Slots are
`tick_ns` wide and hold the timers due within one turn of the wheel. Timers
further away (idle peers' probes, minutes apart at 4,096 peers) wait in a heap
and move into their slot when the wheel comes within a turn of them: in the
slots they would be scanned at every tick of every turn until due.
"""

from __future__ import annotations

import heapq
import itertools


class Timer:
    __slots__ = ("deadline", "callback", "cancelled")

    def __init__(self, deadline: int, callback):
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class TimerWheel:
    def __init__(self, now: int, tick_ns: int = 1000000, slots: int = 256):
        self.tick_ns = tick_ns
        self.slots = [[] for _slot in range(slots)]
        self.current = now // tick_ns  # the next tick not yet processed
        self.count = 0
        self.later = []  # (deadline, order, timer): timers a turn or more ahead of `current`
        self._order = itertools.count()  # ties in `later` never compare timers

    def schedule(self, deadline: int, callback) -> Timer:
        timer = Timer(deadline, callback)
        tick = max(deadline // self.tick_ns, self.current)
        if tick - self.current < len(self.slots):
            self.slots[tick % len(self.slots)].append(timer)
        else:
            heapq.heappush(self.later, (deadline, next(self._order), timer))
        self.count += 1
        return timer

    def _bring_in(self, until_tick: int) -> None:
        """Move the waiting timers due before until_tick into their slots."""
        while self.later and self.later[0][0] // self.tick_ns < until_tick:
            timer = heapq.heappop(self.later)[2]
            if timer.cancelled:
                self.count -= 1
                continue
            tick = max(timer.deadline // self.tick_ns, self.current)
            self.slots[tick % len(self.slots)].append(timer)

    def next_deadline(self):
        """The earliest pending deadline, or None (a scan of the slots, called once per loop
        turn; every slot's timer is earlier than any waiting in `later`)."""
        best = None
        n = len(self.slots)
        for i in range(n):
            for timer in self.slots[(self.current + i) % n]:
                if not timer.cancelled and (best is None or timer.deadline < best):
                    best = timer.deadline
            if best is not None and best // self.tick_ns <= self.current + i:
                return best  # nothing in a later slot of this turn can be earlier
        if best is None:
            while self.later and self.later[0][2].cancelled:
                heapq.heappop(self.later)
                self.count -= 1
            if self.later:
                best = self.later[0][0]
        return best

    def expire(self, now: int) -> list:
        """Pop every timer whose deadline has passed, in deadline order."""
        due = []
        last = now // self.tick_ns
        n = len(self.slots)
        # Everything due before the end of the turn that starts at `last` takes its slot first:
        # the scan below then finds what is due now, and leaves the slots holding one turn.
        self._bring_in(max(last, self.current) + n)
        ticks = min(last - self.current + 1, n)
        for i in range(max(ticks, 0)):
            slot = self.slots[(self.current + i) % n]
            if not slot:
                continue
            keep = []
            for timer in slot:
                if timer.cancelled:
                    self.count -= 1
                elif timer.deadline <= now:
                    due.append(timer)
                    self.count -= 1
                else:
                    keep.append(timer)
            slot[:] = keep
        self.current = max(self.current, last)
        due.sort(key=lambda t: t.deadline)
        return due

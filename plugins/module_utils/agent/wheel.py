# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A hashed timer wheel: O(1) schedule and cancel for thousands of probe timers.

Every (peer, plane) path has a timer that fires once per probe interval; a
heap would pay log(n) per reschedule, a wheel pays a list append. Slots are
`tick_ns` wide; a timer further away than one turn simply stays in its slot
until a turn where its deadline has passed.
"""

from __future__ import annotations


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

    def schedule(self, deadline: int, callback) -> Timer:
        timer = Timer(deadline, callback)
        tick = max(deadline // self.tick_ns, self.current)
        self.slots[tick % len(self.slots)].append(timer)
        self.count += 1
        return timer

    def next_deadline(self):
        """The earliest pending deadline, or None (a scan: called once per loop turn)."""
        best = None
        n = len(self.slots)
        for i in range(n):
            for timer in self.slots[(self.current + i) % n]:
                if not timer.cancelled and (best is None or timer.deadline < best):
                    best = timer.deadline
            if best is not None and best // self.tick_ns <= self.current + i:
                return best  # nothing in a later slot of this turn can be earlier
        return best

    def expire(self, now: int) -> list:
        """Pop every timer whose deadline has passed, in deadline order."""
        due = []
        last = now // self.tick_ns
        n = len(self.slots)
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

# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One probed path: this host -> a peer on one plane, and back.

Loss is counted per probe *sent*: each probe is judged when the next one goes
(at least one interval after it left), after every reply that arrived
meanwhile was read. So a stalled agent, which sends nothing while it stalls, never turns its
own stall into missed probes. `multiplier` consecutive unanswered probes make
the path dead.

A reply counts once, only for a probe still outstanding (one of the last `multiplier` sent:
older ones were judged missed long ago), and only if it carries the probe's token: 64 random
bits sent in the probe's time field, which the peer's data path echoes untouched. A host off the
path never sees a token, so it can neither forge a reply nor replay one (docs/agent.md says what
a host on the path can still do). Every other reply is counted as rejected and ignored.
"""

from __future__ import annotations

import collections
import secrets

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import probe

LOSS_WINDOW = 100  # probes over which probe loss is reported


class Path:
    def __init__(self, peer_id: int, plane: int, family: int, address: str, judge, multiplier: int):
        self.peer_id = peer_id
        self.plane = plane
        self.family = family
        self.address = address
        self.judge = judge
        self.multiplier = multiplier
        self.seq = 0  # last sequence number sent
        self.sent_ns = 0  # when it left
        self.outstanding = {}  # seq -> (token, sent_ns) of the probes a reply may still answer
        self.rejected = 0  # replies for no outstanding probe, again, or with a wrong token
        self.answered = 0  # highest sequence number answered
        self.checked = 0  # last sequence number judged
        self.misses = 0  # consecutive probes judged unanswered
        self.sent = 0
        self.confirmations = 0  # probes sent while the latest was unanswered, or under a TCP alarm
        self.received = 0
        self.send_errors = 0
        self.failovers = 0
        self.failbacks = 0
        self.rtt_last_ns = None
        self.rtt_avg_ns = None
        self.last_reply_ns = 0
        self.outcomes = collections.deque(maxlen=LOSS_WINDOW)
        self.lost = 0  # unanswered probes in outcomes, kept as they come and go (metrics read it per path)
        self.timer = None
        self.alarm = False  # a connection to the peer retransmitted: confirm until a reply (agent.alarm)
        self.alarms = 0

    def check(self, now: int) -> None:
        """Judge the probe sent last (one interval ago): answered or missed."""
        if self.seq == self.checked:  # nothing sent since the last check
            return
        self.checked = self.seq
        answered = self.answered >= self.seq
        if len(self.outcomes) == self.outcomes.maxlen and not self.outcomes[0]:
            self.lost -= 1  # about to leave the window
        self.outcomes.append(answered)
        if not answered:
            self.lost += 1
            self.misses += 1
            if self.misses >= self.multiplier:
                self.judge.observe(False, now)

    def next_probe(self, now: int) -> tuple:
        """(seq, token) of a new probe, outstanding from now."""
        self.seq += 1
        self.sent += 1
        self.sent_ns = now
        token = secrets.randbits(64)
        self.outstanding[self.seq] = (token, now)
        self.outstanding.pop(self.seq - max(self.multiplier, 1), None)  # judged missed: too late to count
        return self.seq, token

    def request(self, session: int, now: int) -> bytes:
        seq, token = self.next_probe(now)
        return probe.request(session, seq, token)

    def replied(self, seq: int, token: int, now: int) -> bool:
        """A reply carrying (seq, token); False (counted in rejected) unless it answers an
        outstanding probe for the first time."""
        found = self.outstanding.get(seq)
        if found is None or found[0] != token:
            self.rejected += 1
            return False
        del self.outstanding[seq]
        sent_ns = found[1]
        self.received += 1
        self.answered = max(self.answered, seq)
        self.misses = 0
        self.alarm = False
        self.last_reply_ns = now
        rtt = max(0, now - sent_ns)
        self.rtt_last_ns = rtt
        self.rtt_avg_ns = rtt if self.rtt_avg_ns is None else (7 * self.rtt_avg_ns + rtt) // 8
        self.judge.observe(True, now)
        return True

    @property
    def suspect(self) -> bool:
        """Down, or its latest probe unanswered: probe it at the full rate whatever the traffic."""
        return not self.judge.up or self.misses > 0

    @property
    def healthy(self) -> bool:
        """Judged up and its latest probe answered: somewhere traffic can go now."""
        return self.judge.up and self.judge.alive and self.misses == 0

    def loss_ratio(self) -> float:
        if not self.outcomes:
            return 0.0
        return self.lost / float(len(self.outcomes))

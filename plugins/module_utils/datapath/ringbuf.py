# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A consumer of one BPF ring buffer map (BPF_MAP_TYPE_RINGBUF), through mmap alone.

The kernel's layout (kernel/bpf/ringbuf.c, as libbpf reads it): at offset 0 one page holding the
consumer position (ours to write), at one page the producer position, then the data area mapped
twice in a row so a record never wraps. Each record starts with an 8-byte header: its length,
with a busy bit while the program still writes it and a discard bit, then the data, padded to 8.
No callback into Python from C (libbpf's ring_buffer__new needs one, which a unit with
MemoryDenyWriteExecute= refuses), no library: the map fd itself polls readable when records wait.
"""

from __future__ import annotations

import mmap
import struct

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import bpfsys

BUSY_BIT = 1 << 31
DISCARD_BIT = 1 << 30
HEADER = 8


class RingBuffer:
    """Records of the ring buffer map behind map_fd (the caller keeps the fd open)."""

    def __init__(self, map_fd: int) -> None:
        self.fd = map_fd
        size = bpfsys.map_info(map_fd).max_entries  # a power of 2, a multiple of the page size
        self.mask = size - 1
        page = mmap.PAGESIZE
        self._consumer = mmap.mmap(map_fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
        try:
            self._producer = mmap.mmap(map_fd, page + 2 * size, mmap.MAP_SHARED, mmap.PROT_READ, offset=page)
        except OSError:
            self._consumer.close()
            raise
        self._data = page  # where the data area starts in the producer mapping

    def fileno(self) -> int:
        return self.fd

    def consume(self) -> list:
        """Every complete record that arrived, as bytes, in order; the consumer position follows."""
        out = []
        cons = struct.unpack_from("Q", self._consumer, 0)[0]
        while True:
            prod = struct.unpack_from("Q", self._producer, 0)[0]
            if cons >= prod:
                return out
            while cons < prod:
                at = self._data + (cons & self.mask)
                length = struct.unpack_from("I", self._producer, at)[0]
                if length & BUSY_BIT:  # still being written: the next poll brings it
                    return out
                size = length & ~(BUSY_BIT | DISCARD_BIT)
                if not length & DISCARD_BIT:
                    out.append(bytes(self._producer[at + HEADER:at + HEADER + size]))
                cons += (size + HEADER + 7) & ~7
                struct.pack_into("Q", self._consumer, 0, cons)

    def close(self) -> None:
        self._producer.close()
        self._consumer.close()

"""edgeft namespace fabric lab: a fabric of Linux network namespaces on one machine.

Builds hosts with one NIC per plane, ToRs/spines as bridges (L2) or routers (routed),
injects and repairs faults, and writes the Ansible inventory for the collection's tests.
"""

from .errors import LabError, TopologyError
from .faults import Fault
from .lab import Lab
from .topology import Topology, load_topology

__all__ = ["Fault", "Lab", "LabError", "Topology", "TopologyError", "load_topology"]

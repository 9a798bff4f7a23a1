# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host model: what a host declares and what its kernel shows, read one way.

planes: the plane declaration (parse, validate, normalise; every rule in one
place), shared by every module, filter and the agent that reads planes.
nics: a plane NIC as the kernel shows it (usable addresses, counters and
carrier), read with pyroute2. Above the data path layer, below the cores and
the agent.
"""

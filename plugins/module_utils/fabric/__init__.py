# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the agent and the modules both do on the fabric, below both of them.

routes: the backup and held route tables, their rules and the route form
(the agent's failover and plane_state's drains put the same routes in the
same tables). icmp: the Internet checksum and echo requests (the agent's
first-hop probes and plane_state's peer notifications). The probe packet
itself is a data path layout: datapath/probe.py.
"""

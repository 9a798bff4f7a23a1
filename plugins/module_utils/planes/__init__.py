# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's planes in its pinned maps: the plane_state module, and what peer_table shares of it.

maps: open the pinned maps with the pin directory locked (EmptyMaps in check
mode before the first attach). slots: the maps' plane slots and their flags.
state: the plane_state module (validate, drain or undrain, report).
peer_drains: drains for some peers only; drain_record: what they changed, in
state_dir. drain_routes: the held routes of a drained plane. notify: an echo
request that makes the peers learn a change at once; confirm: echoes whose
answers prove that every peer keeps off a drained plane. report: planes, peers
and counters as the modules return them. The plane declaration and the peer
table's record are the host model's (host/planes.py, host/records.py).
Free of Ansible imports; every error names the option that caused it.
"""

# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What removing edgeft from a host (playbooks/uninstall.yml) needs beyond the modules' own
state=absent: `footprint` reads what edgeft left from its records, `steering` removes the
agent's and the drains' rules and tables and the peer table's neighbour entries, `addresses`
undoes multihome while keeping the plane addresses it may only have adopted."""

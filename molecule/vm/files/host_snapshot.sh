#!/bin/sh
# Everything edgeft may change on a host, as text: two runs print the same lines when nothing
# changed. Arguments: the NICs whose qdiscs, filters and sysctls count (planes and bond ports).
#
# Links, addresses, the routes of every table and the rules of both families; the neighbour
# entries traffic does not make (permanent; managed ones by address only, their state follows
# traffic; noarp ones are made by traffic over lo and expire); the NICs' sysctls (and
# all/default), their qdiscs but the root one, and filters; what is pinned in the bpffs; the unit
# files and their states; and every file, directory and link under /etc, /usr/local and /var/lib
# with its mode and content, except what the system rewrites on its own (VOLATILE). The root
# qdisc is left out: a NIC never up has none ("noop"), and the kernel attaches its default one
# (net.core.default_qdisc) the first time the NIC goes up, which setting it down again does not
# undo; edgeft's own qdisc is the clsact one. One command: under software emulation each module
# run costs seconds.
set -eu

VOLATILE='^/var/lib/(systemd/(timers|random-seed|timesync|catalog|coredump)|apt/(lists|periodic|daily_lock)|logrotate|dhcp|private/systemd)(/| |$)'

section() { printf '=== %s\n' "$1"; }

section links
ip -d link show | sed -E 's/ qdisc [^ ]+ / /'
section addresses
ip address show | sed -E 's/ qdisc [^ ]+ / /'
section routes4
ip -4 route show table all
section routes6
ip -6 route show table all
section rules4
ip -4 rule show
section rules6
ip -6 rule show
section neighbours
ip neigh show nud permanent
ip -j neigh show | python3 -c 'import json, sys
for n in json.load(sys.stdin):
    if "managed" in n:
        print("%s dev %s managed" % (n["dst"], n["dev"]))' | sort
pattern='all|default'
for nic in "$@"; do
    pattern="$pattern|$nic"
    section "qdiscs $nic"
    tc qdisc show dev "$nic" | grep -v ' root ' || true
    for direction in ingress egress; do
        section "filters $nic $direction"
        tc filter show dev "$nic" "$direction"
    done
done
section sysctls
# -e: IPv6's stable_secret cannot be read until it is set.
sysctl -e -a --pattern "^net\.ipv[46]\.(conf|neigh)\.($pattern)\." | sort
section pins
find /sys/fs/bpf -mindepth 1 | sort
section units
systemctl list-unit-files --no-legend --no-pager | sort
section files
find /etc /usr/local /var/lib -xdev -printf '%p %y %m %u:%g %l\n' | grep -Ev "$VOLATILE" | sort
find /etc /usr/local /var/lib -xdev -type f -print0 | grep -zEv "$VOLATILE" | sort -z | xargs -0 -r sha256sum

# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bond options <-> the kernel's names and numbers. Pure.

- pyroute2 arguments (IFLA_BOND_* in IFLA_INFO_DATA of RTM_NEWLINK), which the
  module uses to create and change bonds;
- sysfs files under /sys/class/net/<bond>/bonding/ (the option names are the
  sysfs names), their values and the order to write them in: what ifupdown's
  bond-* options and a shell on the VM speak;
- IFLA_BOND_* attributes read back from the kernel -> normalised options.
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.bond import spec

# The kernel's numbers (include/uapi/linux/if_bonding.h, bond_options.c).
MODE_IDS = {"balance-rr": 0, "active-backup": 1, "balance-xor": 2, "broadcast": 3, "802.3ad": 4,
            "balance-tlb": 5, "balance-alb": 6}
ARP_VALIDATE_IDS = {"none": 0, "active": 1, "backup": 2, "all": 3, "filter": 4, "filter_active": 5, "filter_backup": 6}
ARP_ALL_TARGETS_IDS = {"any": 0, "all": 1}
LACP_RATE_IDS = {"slow": 0, "fast": 1}
XMIT_HASH_IDS = {"layer2": 0, "layer3+4": 1, "layer2+3": 2, "encap2+3": 3, "encap3+4": 4, "vlan+srcmac": 5}

# sysfs file per option; writing them in this order works on a fresh bond that is down and has no ports.
SYSFS_ORDER = ("mode", "xmit_hash_policy", "lacp_rate", "miimon", "updelay", "downdelay", "arp_interval",
               "arp_ip_target", "arp_validate", "arp_all_targets", "primary")
SYSFS_DIR = "/sys/class/net/%s/bonding"


def _name(table, number):
    for name, value in table.items():
        if value == number:
            return name
    return None


def pyroute2_args(options, ifindex=None) -> dict:
    """IFLA_BOND_* values as pyroute2 link() keywords (kind='bond' not included).

    Only options the kernel accepts in the bond's mode are sent (it refuses the
    others with EACCES even when they are 0), and the ones that switch a
    monitor off are sent explicitly, so the same arguments move a bond between
    monitors. IFLA_BOND_PRIMARY is an interface index (0 clears it): ifindex
    maps names to indexes; without it the primary stays a name, to be
    resolved when the step runs.
    """
    mode = options["mode"]
    args = {"bond_mode": MODE_IDS[mode], "bond_miimon": options["miimon"] or 0}
    if options["miimon"]:
        # The kernel refuses delays without the MII monitor (EPERM).
        args["bond_updelay"] = options["updelay"]
        args["bond_downdelay"] = options["downdelay"]
    if mode in spec.ARP_MONITOR_MODES:
        args["bond_arp_interval"] = options["arp_interval"] or 0
        args["bond_arp_ip_target"] = list(options["arp_ip_target"])
        args["bond_arp_validate"] = ARP_VALIDATE_IDS[options["arp_validate"] or "none"]
        args["bond_arp_all_targets"] = ARP_ALL_TARGETS_IDS[options["arp_all_targets"] or "any"]
    if mode in spec.PRIMARY_MODES:
        primary = options["primary"]
        args["bond_primary"] = (primary if ifindex is None else ifindex[primary]) if primary else 0
    if mode in spec.LACP_MODES:
        args["bond_ad_lacp_rate"] = LACP_RATE_IDS[options["lacp_rate"]]
    if mode in spec.HASH_MODES:
        args["bond_xmit_hash_policy"] = XMIT_HASH_IDS[options["xmit_hash_policy"]]
    return args


def sysfs_settings(options) -> list:
    """[(sysfs file, value to write)] in SYSFS_ORDER, for a bond that is down and has no ports.

    Only the options that apply to the bond (not None); arp_ip_target takes one
    '+ADDRESS' write per target.
    """
    out = []
    for option in SYSFS_ORDER:
        value = options[option]
        if value is None or (option in ("updelay", "downdelay") and not options["miimon"]):
            continue
        if option == "arp_ip_target":
            out.extend((option, "+" + target) for target in value)
        else:
            out.append((option, str(value)))
    return out


def parse_sysfs(option, text):
    """The option's value from what its sysfs file shows ('active-backup 1', '198.18.1.1,198.18.1.2'...)."""
    text = text.strip()
    if option == "arp_ip_target":
        return [t for t in text.replace(",", " ").split() if t]
    if option in ("miimon", "arp_interval", "updelay", "downdelay"):
        return int(text or 0)
    if option == "primary":
        return text or None
    return text.split()[0] if text else None


def options_from_kernel(data, ifnames) -> dict:
    """IFLA_INFO_DATA of a bond ({IFLA_BOND_*: value}) -> options normalised as spec.normalize_bond does.

    ifnames: ifindex -> ifname, for IFLA_BOND_PRIMARY.
    """
    mode = _name(MODE_IDS, data.get("IFLA_BOND_MODE", 0))
    miimon = data.get("IFLA_BOND_MIIMON") or 0
    arp_interval = data.get("IFLA_BOND_ARP_INTERVAL") or 0
    arp_on = bool(arp_interval) and not miimon
    primary = ifnames.get(data.get("IFLA_BOND_PRIMARY") or 0)
    return {
        "mode": mode,
        "miimon": miimon or None,
        "arp_interval": arp_interval if arp_on else None,
        "arp_ip_target": list(data.get("IFLA_BOND_ARP_IP_TARGET") or []) if arp_on else [],
        "arp_validate": _name(ARP_VALIDATE_IDS, data.get("IFLA_BOND_ARP_VALIDATE", 0)) if arp_on else None,
        "arp_all_targets": _name(ARP_ALL_TARGETS_IDS, data.get("IFLA_BOND_ARP_ALL_TARGETS", 0)) if arp_on else None,
        "lacp_rate": _name(LACP_RATE_IDS, data.get("IFLA_BOND_AD_LACP_RATE", 0)) if mode in spec.LACP_MODES else None,
        "primary": primary if mode in spec.PRIMARY_MODES else None,
        "updelay": (data.get("IFLA_BOND_UPDELAY") or 0) if miimon else 0,
        "downdelay": (data.get("IFLA_BOND_DOWNDELAY") or 0) if miimon else 0,
        "xmit_hash_policy": _name(XMIT_HASH_IDS, data.get("IFLA_BOND_XMIT_HASH_POLICY", 0)) if mode in spec.HASH_MODES else None,
    }

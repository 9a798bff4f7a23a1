# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent's configuration: a JSON file, command-line overrides, validation.

Everything that can be checked before the loop starts is checked here, and a
bad value stops the agent with one line naming the option (exit code 2)
rather than a control loop that half works. Host facts (interfaces, pins)
are checked in checks.py.
"""

from __future__ import annotations

import ipaddress
import json

from ansible_collections.edgeft.failover.plugins.module_utils import constants, jsonrecord
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.host import planes as host_planes

DEFAULTS = {
    "pin_root": "/sys/fs/bpf/edgeft",
    "state_dir": constants.STATE_DIR,
    "planes": None,
    "peers": None,
    "interval_ms": 10,
    "idle_interval_ms": 1000,
    "idle_probes_per_s": 20,
    "active_window_ms": 2000,
    "multiplier": 3,
    "confirm_interval_ms": 2,
    "hold_down_ms": 1000,
    "probe_family": "auto",
    "probe_tos": 0xC0,
    "dampening": None,
    "backup_routes": None,
    "metrics_listen": "127.0.0.1:9531",
    "resync_ms": 1000,
    "metrics_peers": 10,
    "metrics_min_interval_ms": 1000,
    "tcp": None,
    "log_level": "info",
}

DAMPENING_DEFAULTS = {
    "enabled": True,
    "penalty": 1000,
    "suppress": 2000,
    "reuse": 750,
    "half_life_ms": 5000,
    "max_suppress_ms": 20000,
}

BACKUP_ROUTES_DEFAULTS = {
    "enabled": True,
    "table": constants.BACKUP_TABLE,
    "priority": constants.BACKUP_RULE_PRIORITY,
}

# TCP to fabric peers (datapath/sockops.py, docs/tcp.md). rto_min_ms and delack_max_ms: 0 leaves
# the kernel's; chosen in docs/decisions.md ("TCP to fabric peers").
TCP_DEFAULTS = {
    "enabled": False,
    "object": "",
    "cgroup": "",
    "rto_min_ms": 16,
    "delack_max_ms": 8,
    "signal": True,
}

LOG_LEVELS = ("debug", "info", "warning", "error")

# How often the agent reads which peers had traffic (two batch map reads); with the data path's
# wake records (agent/resume.py), which bring the peers whose traffic resumes at once, the read
# only has to find the peers that went idle.
ACTIVITY_SCAN_MS = 100
ACTIVITY_RESCAN_MS = 1000


class ConfigError(EdgeftError, ValueError):
    """A bad configuration; the message starts with the option's name."""


def load(path, overrides=None) -> "Config":
    """Read the JSON file at path (None: defaults only), apply overrides, validate."""
    data = {}
    if path is not None:
        data = jsonrecord.read_config(path, ConfigError)
        if not isinstance(data, dict):
            raise ConfigError("config: %s must hold a JSON object" % path)
    for key, value in (overrides or {}).items():
        if value is not None:
            data[key] = value
    return Config(data)


# The upper bound of every number (the lower bounds are checked with their reasons below): an
# hour for a time, beyond which a setting is a typo, not a choice. docs/agent.md lists them, and
# the role's argument specs repeat them (tests/pure/agent/test_config.py compares).
MAXIMUM = {
    "interval_ms": 60000,
    "idle_interval_ms": 3600000,
    "idle_probes_per_s": 100000,
    "active_window_ms": 3600000,
    "multiplier": 100,
    "confirm_interval_ms": 59999,
    "hold_down_ms": 3600000,
    "probe_tos": 255,
    "resync_ms": 3600000,
    "metrics_peers": 4096,
    "metrics_min_interval_ms": 60000,
    "dampening.penalty": 1000000,
    "dampening.suppress": 1000000,
    "dampening.reuse": 1000000,
    "dampening.half_life_ms": 3600000,
    "dampening.max_suppress_ms": 3600000,
    "backup_routes.table": 2 ** 32 - 2,
    "backup_routes.priority": 32764,
    "tcp.rto_min_ms": 200,
    "tcp.delack_max_ms": 200,
}


def _int(data, key, minimum=None, where=None):
    """A JSON integer: not a float (1e12, NaN, Infinity), a boolean or a string; at most MAXIMUM."""
    where = where or key
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError("%s: expected an integer, got %s" % (where, json.dumps(value)))
    value = int(value)  # a subclass (the role's filter gets Ansible's tagged values) becomes a plain int
    if minimum is not None and value < minimum:
        raise ConfigError("%s: must be at least %d, got %d" % (where, minimum, value))
    if where in MAXIMUM and value > MAXIMUM[where]:
        raise ConfigError("%s: must be at most %d, got %d" % (where, MAXIMUM[where], value))
    return value


def _section(data, key, defaults):
    value = data.get(key)
    if value is None:
        return dict(defaults)
    if isinstance(value, bool):
        return dict(defaults, enabled=value)
    if not isinstance(value, dict):
        raise ConfigError("%s: expected an object (or true/false), got %r" % (key, value))
    unknown = sorted(set(value) - set(defaults))
    if unknown:
        raise ConfigError("%s.%s: unknown option (known: %s)" % (key, unknown[0], ", ".join(sorted(defaults))))
    out = dict(defaults)
    out.update(value)
    for k, v in out.items():
        if k == "enabled":
            if not isinstance(v, bool):
                raise ConfigError("%s.enabled: expected true or false, got %r" % (key, v))
        else:
            out[k] = _int(out, k, 0, "%s.%s" % (key, k))
            if out[k] == 0 and k not in ("table",):
                raise ConfigError("%s.%s: must be positive, got 0" % (key, k))
    return out


def _tcp(value):
    """The tcp section: the sock_ops program's switch, object, cgroup and settings."""
    if value is None or isinstance(value, bool):
        value = {"enabled": bool(value)}
    if not isinstance(value, dict):
        raise ConfigError("tcp: expected an object (or true/false), got %r" % (value,))
    unknown = sorted(set(value) - set(TCP_DEFAULTS))
    if unknown:
        raise ConfigError("tcp.%s: unknown option (known: %s)" % (unknown[0], ", ".join(sorted(TCP_DEFAULTS))))
    out = dict(TCP_DEFAULTS, **value)
    for key in ("enabled", "signal"):
        if not isinstance(out[key], bool):
            raise ConfigError("tcp.%s: expected true or false, got %r" % (key, out[key]))
    for key in ("rto_min_ms", "delack_max_ms"):
        out[key] = _int(out, key, 0, "tcp.%s" % key)
    if not isinstance(out["object"], str) or (out["object"] and not out["object"].startswith("/")):
        raise ConfigError("tcp.object: %r must be an absolute path" % (out["object"],))
    if not isinstance(out["cgroup"], str) or ".." in out["cgroup"].split("/"):
        raise ConfigError("tcp.cgroup: %r must be a path without '..': absolute, or under the cgroup v2 root, or empty "
                          "for the root itself (the whole host)" % (out["cgroup"],))
    if out["enabled"] and not out["object"]:
        raise ConfigError("tcp.object: the TCP program's object file is needed with tcp.enabled (the role installs it)")
    if out["rto_min_ms"] and out["delack_max_ms"] >= out["rto_min_ms"]:
        raise ConfigError("tcp.delack_max_ms: %d ms is not below tcp.rto_min_ms (%d ms): a peer delaying its ACK that "
                          "long would make every such wait a spurious retransmission" % (out["delack_max_ms"], out["rto_min_ms"]))
    return out


def _address(value, where, family):
    if value in (None, ""):
        return None
    try:
        a = ipaddress.ip_interface(str(value)).ip
    except ValueError:
        raise ConfigError("%s: %r is not an IP address" % (where, value)) from None
    if a.version != family:
        raise ConfigError("%s: %s is not an IPv%d address" % (where, a, family))
    return str(a)


def _planes(value):
    """The host model's plane declaration (host/planes.py), the same rules and messages as every
    module's, reshaped for the loop: addresses by family, without their prefix length."""
    try:
        planes = host_planes.normalize_planes(value, option="planes", prefix_required=False)
    except host_planes.OptionError as e:
        raise ConfigError(str(e)) from None

    def text(ip):
        return None if ip is None else str(getattr(ip, "ip", ip))

    return [{
        "name": p["name"],
        "interface": p["interface"],
        "index": p["index"],
        4: text(p["ipv4"]),
        6: text(p["ipv6"]),
        # A routed plane's first hop, probed with ICMP echo (firsthop.py).
        "gateway": {4: text(p["gateway4"]), 6: text(p["gateway6"])},
    } for p in planes]


def _peers(value, planes):
    """Optional names for the peers the maps hold: {address: name}."""
    if value is None:
        return {}
    if not isinstance(value, list):
        raise ConfigError("peers: expected a list of {name, planes: [{name, ipv4, ipv6}]}")
    known = {p["name"] for p in planes}
    names = {}
    for i, peer in enumerate(value):
        where = "peers[%d]" % i
        if not isinstance(peer, dict) or not peer.get("name"):
            raise ConfigError("%s.name: a peer name is required" % where)
        for j, plane in enumerate(peer.get("planes") or []):
            pwhere = "%s.planes[%d]" % (where, j)
            if not isinstance(plane, dict) or plane.get("name") not in known:
                raise ConfigError("%s.name: %r is not one of this host's planes (%s)"
                                  % (pwhere, plane.get("name") if isinstance(plane, dict) else plane, ", ".join(sorted(known))))
            for key, family in (("ipv4", 4), ("ipv6", 6)):
                a = _address(plane.get(key), "%s.%s" % (pwhere, key), family)
                if a is not None:
                    names[a] = str(peer["name"])
    return names


def _listen(value):
    if value in (None, "", False) or str(value).lower() in ("false", "off", "none"):
        return None
    text = str(value)
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    try:
        ipaddress.ip_address(host)
        port = int(port)
    except ValueError:
        raise ConfigError("metrics_listen: %r is not ADDRESS:PORT (e.g. 127.0.0.1:9531), or false to disable" % text) from None
    if not sep or not 0 < port < 65536:
        raise ConfigError("metrics_listen: %r needs a port 1..65535" % text)
    return host, port


class Config:
    """Validated settings; times in ns where the loop uses them."""

    def __init__(self, data):
        unknown = sorted(set(data) - set(DEFAULTS))
        if unknown:
            raise ConfigError("%s: unknown option (known: %s)" % (unknown[0], ", ".join(sorted(DEFAULTS))))
        d = dict(DEFAULTS)
        d.update(data)
        self.pin_root = self._path(d, "pin_root")
        self.state_dir = self._path(d, "state_dir") if d["state_dir"] else None
        self.planes = _planes(d["planes"])
        self.peer_names = _peers(d["peers"], self.planes)
        self.interval_ms = _int(d, "interval_ms")
        if self.interval_ms <= 0:
            raise ConfigError("interval_ms: must be a positive number of milliseconds, got %d" % self.interval_ms)
        self.idle_interval_ms = _int(d, "idle_interval_ms")
        if self.idle_interval_ms < self.interval_ms:
            raise ConfigError("idle_interval_ms: %d ms is shorter than interval_ms (%d ms): peers without traffic are "
                              "probed less often, not more" % (self.idle_interval_ms, self.interval_ms))
        self.idle_probes_per_s = _int(d, "idle_probes_per_s", 1)
        self.active_window_ms = _int(d, "active_window_ms")
        if self.active_window_ms < ACTIVITY_SCAN_MS:
            raise ConfigError("active_window_ms: must be at least %d ms (how often traffic is looked at), got %d"
                              % (ACTIVITY_SCAN_MS, self.active_window_ms))
        self.multiplier = _int(d, "multiplier")
        if self.multiplier < 1:
            raise ConfigError("multiplier: must be at least 1 (probes missed before a path is down), got %d" % self.multiplier)
        self.confirm_interval_ms = _int(d, "confirm_interval_ms", 0)
        if self.confirm_interval_ms >= self.interval_ms:
            raise ConfigError("confirm_interval_ms: %d ms is not shorter than interval_ms (%d ms): a suspect path is "
                              "confirmed faster than it is probed, not slower; set it below interval_ms, or 0 to "
                              "confirm at interval_ms" % (self.confirm_interval_ms, self.interval_ms))
        self.hold_down_ms = _int(d, "hold_down_ms")
        detection = self.interval_ms * self.multiplier
        if self.hold_down_ms < detection:
            raise ConfigError(
                "hold_down_ms: %d ms is shorter than the detection time (interval_ms %d x multiplier %d = %d ms): "
                "a path could fail back before a new failure could be seen" % (self.hold_down_ms, self.interval_ms, self.multiplier, detection))
        if d["probe_family"] not in ("auto", 4, 6, "4", "6"):
            raise ConfigError("probe_family: expected auto, 4 or 6, got %r" % (d["probe_family"],))
        self.probe_family = d["probe_family"] if d["probe_family"] == "auto" else int(d["probe_family"])
        self.probe_tos = _int(d, "probe_tos", 0)  # at most 255: MAXIMUM
        self.dampening = _section(d, "dampening", DAMPENING_DEFAULTS)
        damp = self.dampening
        if damp["enabled"] and damp["reuse"] >= damp["suppress"]:
            raise ConfigError("dampening.reuse: %d must be below dampening.suppress (%d)" % (damp["reuse"], damp["suppress"]))
        self.backup_routes = _section(d, "backup_routes", BACKUP_ROUTES_DEFAULTS)
        if not 0 < self.backup_routes["table"] < 2 ** 32 - 1 or self.backup_routes["table"] in (252, 253, 254, 255):
            raise ConfigError("backup_routes.table: %r is not a free routing table id (it and the next one, the held "
                              "table, must be 1..2^32-1 and not 253-255)" % self.backup_routes["table"])
        if not 1 < self.backup_routes["priority"] < 32766 - 1:
            raise ConfigError("backup_routes.priority: must be 2..32764 (rules at priority-1..priority+1, before the main "
                              "table's 32766), got %d" % self.backup_routes["priority"])
        self.metrics_listen = _listen(d["metrics_listen"])
        self.resync_ms = _int(d, "resync_ms", 1)
        self.metrics_peers = _int(d, "metrics_peers", 0)
        self.metrics_min_interval_ms = _int(d, "metrics_min_interval_ms", 0)
        self.tcp = _tcp(d["tcp"])
        if d["log_level"] not in LOG_LEVELS:
            raise ConfigError("log_level: expected one of %s, got %r" % (", ".join(LOG_LEVELS), d["log_level"]))
        self.log_level = d["log_level"]

    @staticmethod
    def _path(d, key):
        value = d[key]
        if not isinstance(value, str) or not value.startswith("/"):
            raise ConfigError("%s: %r must be an absolute path" % (key, value))
        return value

    @property
    def interval_ns(self) -> int:
        return self.interval_ms * 1000000

    @property
    def idle_interval_ns(self) -> int:
        return self.idle_interval_ms * 1000000

    @property
    def active_window_ns(self) -> int:
        return self.active_window_ms * 1000000

    @property
    def confirm_step_ms(self) -> int:
        """After a missed probe of a path with traffic, the time to the next probe (0: the interval)."""
        return self.confirm_interval_ms or self.interval_ms

    @property
    def confirm_interval_ns(self) -> int:
        return self.confirm_step_ms * 1000000

    @property
    def hold_down_ns(self) -> int:
        return self.hold_down_ms * 1000000

    @property
    def detection_ms(self) -> int:
        """From the send of the first probe that goes unanswered to the failover, for a peer with
        traffic: each of multiplier probes is judged a confirmation step after it left. From the
        failure itself, up to one interval more (the probe that finds it)."""
        return self.multiplier * self.confirm_step_ms

    def summary(self) -> str:
        return ("probes every %d ms to peers with traffic in the last %d ms (else at most every %d ms and %d a second "
                "in all), down after %d missed, each due back within %d ms (down %d-%d ms after a failure), hold-down "
                "%d ms, dampening %s" % (
                    self.interval_ms, self.active_window_ms, self.idle_interval_ms, self.idle_probes_per_s, self.multiplier,
                    self.confirm_step_ms, self.detection_ms, self.detection_ms + self.interval_ms,
                    self.hold_down_ms, "on" if self.dampening["enabled"] else "off"))

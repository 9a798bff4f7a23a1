"""Topology files: load, validate strictly, and model them.

Everything a topology can get wrong is rejected here, before the lab creates anything,
with a TopologyError naming the file, the key path (e.g. ``planes[1].ipv4``) and the reason.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, replace
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path
from typing import Any

import yaml

from . import addressing
from .errors import TopologyError
from .topology_fields import IFNAME_MAX, DuplicateKey, StrictLoader, check_ifname, check_keys, integer
from .names import host_name, switch_names

DEFAULT_LAB_NAME = "edgeft"
TOPOLOGY_DIR = Path(__file__).resolve().parent.parent / "topologies"
REPO_ROOT = TOPOLOGY_DIR.parent.parent

# Lab traffic must stay in the benchmarking range (RFC 2544) and unique-local IPv6.
LAB_IPV4_RANGE = IPv4Network("198.18.0.0/15")
LAB_IPV6_RANGE = IPv6Network("fc00::/7")

MAX_RACKS = 127  # routed transit links: one /31 per rack in the plane's first /24, index 0 unused
MAX_HOSTS_PER_RACK = 244  # host addresses are .11 ... .254
MAX_PLANES = 4
KINDS = ("leaf-spine", "flat")
MODES = ("l2", "routed")

LAB_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$")
PLANE_NAME_RE = re.compile(r"^[a-z0-9]+$")

TOP_KEYS = {"name", "description", "fabric", "racks", "hosts_per_rack", "planes", "mtu", "machines"}
TOP_REQUIRED = ("fabric", "racks", "hosts_per_rack", "planes")
FABRIC_KEYS = {"kind", "mode", "isl"}
# What a host is: a network namespace, or a qemu VM whose fabric NICs are taps on the
# switches (edgeft_lab.vm brings the VMs up; the lab builds only the switches for them).
MACHINES = ("netns", "vm")
PLANE_KEYS = {"name", "nic", "ipv4", "ipv6", "failover_ipv4", "failover_ipv6"}
PLANE_REQUIRED = ("ipv4", "ipv6", "name", "nic")
FAILOVER_KEYS = ("failover_ipv4", "failover_ipv6")


@dataclass(frozen=True)
class PlaneSpec:
    name: str
    nic: str
    ipv4: IPv4Network
    ipv6: IPv6Network
    # Routed planes only: where the hosts' failover addresses on this plane come from.
    failover_ipv4: IPv4Network | None = None
    failover_ipv6: IPv6Network | None = None

    def to_dict(self) -> dict[str, str]:
        doc = {"name": self.name, "nic": self.nic, "ipv4": str(self.ipv4), "ipv6": str(self.ipv6)}
        # Defaults stay implicit, so a lab's fingerprint does not change by spelling them out.
        if self.failover_ipv4 is not None and self.failover_ipv4 != default_failover_ipv4(self.ipv4):
            doc["failover_ipv4"] = str(self.failover_ipv4)
        if self.failover_ipv6 is not None and self.failover_ipv6 != default_failover_ipv6(self.ipv6):
            doc["failover_ipv6"] = str(self.failover_ipv6)
        return doc


@dataclass(frozen=True)
class Topology:
    """A validated topology. Node names, links and addresses are derived in plan.py."""

    name: str
    kind: str
    mode: str
    hosts_per_rack: tuple[int, ...]
    planes: tuple[PlaneSpec, ...]
    mtu: int | None = None
    description: str = ""
    source: str = "<memory>"
    machines: str = "netns"
    # Flat fabrics: inter-switch links join planes' switches into one L2 domain, as two ToRs
    # serving active-backup bonds are. True chains every plane's switch (sw-a - sw-b - ...); a
    # tuple of plane-name pairs joins just those switches.
    isl: bool | tuple[tuple[str, str], ...] = False

    @property
    def racks(self) -> int:
        return len(self.hosts_per_rack)

    @property
    def isl_pairs(self) -> tuple[tuple[str, str], ...]:
        """The planes whose switches an inter-switch link joins, in link order."""
        if self.isl is True:
            names = [p.name for p in self.planes]
            return tuple(zip(names, names[1:]))
        return self.isl or ()

    @property
    def routed(self) -> bool:
        return self.mode == "routed"

    def renamed(self, name: str) -> Topology:
        """The same fabric under another lab name (namespace prefix), e.g. for tests."""
        _check_lab_name(self.source, "name", name)
        return replace(self, name=name)

    def to_dict(self) -> dict[str, Any]:
        """The normalized topology, in the file schema (round-trips through from_dict)."""
        doc: dict[str, Any] = {
            "name": self.name,
            "fabric": {"kind": self.kind, "mode": self.mode, **_isl_dict(self.isl)},
            "racks": self.racks,
            "hosts_per_rack": list(self.hosts_per_rack),
            "planes": [p.to_dict() for p in self.planes],
        }
        if self.mtu is not None:
            doc["mtu"] = self.mtu
        if self.machines != "netns":
            doc["machines"] = self.machines
        if self.description:
            doc["description"] = self.description
        return doc

    def fingerprint(self) -> str:
        """Identifies the fabric that gets built (the description and file path do not count)."""
        doc = self.to_dict()
        doc.pop("description", None)
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def resolve_topology_path(name_or_path: str | Path) -> Path:
    """NAME means lab/topologies/NAME.yml; anything path-like is used as given."""
    text = str(name_or_path)
    if "/" in text or text.endswith((".yml", ".yaml")):
        return Path(text)
    return TOPOLOGY_DIR / f"{text}.yml"


def display_path(path: Path) -> str:
    """Repo-relative when inside the repo, so generated files do not depend on the checkout."""
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(REPO_ROOT))
    except ValueError:
        return str(resolved)


def load_topology(name_or_path: str | Path = "default") -> Topology:
    path = resolve_topology_path(name_or_path)
    source = display_path(path)
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in TOPOLOGY_DIR.glob("*.yml")))
        raise TopologyError(source, "", f"no such topology file (shipped topologies: {known})")
    try:
        text = path.read_text()
    except OSError as exc:
        raise TopologyError(source, "", f"cannot read: {exc.strerror}") from None
    return parse_topology(text, source)


def parse_topology(text: str, source: str = "<string>") -> Topology:
    try:
        doc = yaml.load(text, Loader=StrictLoader)  # a SafeLoader subclass
    except DuplicateKey as exc:
        raise TopologyError(source, f"line {exc.line}", f"duplicate key '{exc.key}'") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise TopologyError(source, where, f"invalid YAML: {problem}") from None
    return from_dict(doc, source)


def from_dict(doc: Any, source: str = "<dict>") -> Topology:
    """Validate a topology document (the parsed YAML) and build the model."""
    if not isinstance(doc, dict):
        raise TopologyError(source, "", "the topology must be a mapping")
    check_keys(source, "", doc, TOP_KEYS, TOP_REQUIRED)

    name = doc.get("name", DEFAULT_LAB_NAME)
    _check_lab_name(source, "name", name)
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise TopologyError(source, "description", "must be a string")

    fabric = doc["fabric"]
    if not isinstance(fabric, dict):
        raise TopologyError(source, "fabric", "must be a mapping with 'kind' and optional 'mode'")
    check_keys(source, "fabric", fabric, FABRIC_KEYS, ("kind",))
    kind = fabric["kind"]
    if kind not in KINDS:
        raise TopologyError(source, "fabric.kind", f"must be one of {', '.join(KINDS)}, not {kind!r}")
    mode = fabric.get("mode", "l2")
    if mode not in MODES:
        raise TopologyError(source, "fabric.mode", f"must be one of {', '.join(MODES)}, not {mode!r}")

    racks = integer(source, "racks", doc["racks"], 1, MAX_RACKS)
    hosts_per_rack = _hosts_per_rack(source, doc["hosts_per_rack"], racks)

    mtu = doc.get("mtu")
    if mtu is not None:
        mtu = integer(source, "mtu", mtu, 1280, 65535)  # IPv6 needs at least 1280

    planes = _planes(source, doc["planes"], racks)
    planes = _failover_prefixes(source, doc["planes"], planes, mode == "routed", hosts_per_rack)
    isl = _isl(source, fabric.get("isl", False), planes)
    if isl and (kind != "flat" or mode != "l2" or len(planes) < 2):
        raise TopologyError(source, "fabric.isl", "inter-switch links join the switches of a flat L2 fabric of 2+ planes")
    machines = doc.get("machines", "netns")
    if machines not in MACHINES:
        raise TopologyError(source, "machines", f"must be one of {', '.join(MACHINES)}, not {machines!r}")
    if machines == "vm" and (kind != "flat" or mode != "l2"):
        raise TopologyError(source, "machines", "VM hosts are supported on flat L2 fabrics (fabric.kind flat, mode l2)")
    topology = Topology(
        name=name,
        kind=kind,
        mode=mode,
        hosts_per_rack=hosts_per_rack,
        planes=planes,
        mtu=mtu,
        description=description,
        source=source,
        machines=machines,
        isl=isl,
    )
    _check_generated_names(topology)
    return topology


def _planes(source: str, value: Any, racks: int) -> tuple[PlaneSpec, ...]:
    if not isinstance(value, list) or not value:
        raise TopologyError(source, "planes", "must be a non-empty list of planes")
    if len(value) > MAX_PLANES:
        raise TopologyError(source, "planes", f"at most {MAX_PLANES} planes are supported")
    planes: list[PlaneSpec] = []
    for i, item in enumerate(value):
        where = f"planes[{i}]"
        if not isinstance(item, dict):
            raise TopologyError(source, where, "must be a mapping with name, nic, ipv4, ipv6")
        check_keys(source, where, item, PLANE_KEYS, PLANE_REQUIRED)
        name = item["name"]
        if not isinstance(name, str) or not PLANE_NAME_RE.match(name):
            raise TopologyError(source, f"{where}.name", f"must be lowercase letters/digits, not {name!r}")
        nic = item["nic"]
        check_ifname(source, f"{where}.nic", nic)
        ipv4 = _prefix(source, f"{where}.ipv4", item["ipv4"], 4, LAB_IPV4_RANGE, 24, racks)
        ipv6 = _prefix(source, f"{where}.ipv6", item["ipv6"], 6, LAB_IPV6_RANGE, 64, racks)
        for j, other in enumerate(planes):
            if other.name == name:
                raise TopologyError(source, f"{where}.name", f"duplicate plane name {name!r} (also planes[{j}])")
            if other.nic == nic:
                raise TopologyError(source, f"{where}.nic", f"duplicate interface {nic!r} (also planes[{j}])")
            if other.ipv4.overlaps(ipv4):
                raise TopologyError(source, f"{where}.ipv4", f"{ipv4} overlaps planes[{j}].ipv4 {other.ipv4}")
            if other.ipv6.overlaps(ipv6):
                raise TopologyError(source, f"{where}.ipv6", f"{ipv6} overlaps planes[{j}].ipv6 {other.ipv6}")
        planes.append(PlaneSpec(name=name, nic=nic, ipv4=ipv4, ipv6=ipv6))  # type: ignore[arg-type]
    return tuple(planes)


def default_failover_ipv4(plane4: IPv4Network) -> IPv4Network:
    """The plane's last /24 (subnet 255 of a /16): racks count up from subnet 1, so it stays free."""
    return addressing.last_subnet4(plane4)[1]


def default_failover_ipv6(plane6: IPv6Network) -> IPv6Network:
    """The plane's last /64 (subnet 0xff of a /56)."""
    return addressing.last_subnet6(plane6)[1]


def _failover_prefixes(
    source: str, docs: list[dict], planes: tuple[PlaneSpec, ...], routed: bool, hosts_per_rack: tuple[int, ...]
) -> tuple[PlaneSpec, ...]:
    """Set and check each plane's failover prefixes; only routed planes route failover addresses."""
    racks = len(hosts_per_rack)
    hosts = [host_name(rack, h) for rack, count in enumerate(hosts_per_rack, 1) for h in range(1, count + 1)]
    result = []
    for i, (doc, plane) in enumerate(zip(docs, planes)):
        if not routed:
            for key in FAILOVER_KEYS:
                if key in doc:
                    raise TopologyError(
                        source, f"planes[{i}].{key}",
                        "only routed fabrics (fabric.mode routed) have failover prefixes: an L2 plane reaches "
                        "every host's native address without translation",
                    )
            result.append(plane)
            continue
        ipv4 = _failover_prefix(source, f"planes[{i}].failover_ipv4", doc.get("failover_ipv4"), plane.ipv4,
                                *addressing.last_subnet4(plane.ipv4), addressing.native_subnets4(plane.ipv4, racks),
                                hosts)
        ipv6 = _failover_prefix(source, f"planes[{i}].failover_ipv6", doc.get("failover_ipv6"), plane.ipv6,
                                *addressing.last_subnet6(plane.ipv6), addressing.native_subnets6(plane.ipv6, racks),
                                hosts)
        result.append(replace(plane, failover_ipv4=ipv4, failover_ipv6=ipv6))
    return tuple(result)


def _failover_prefix(
    source: str, where: str, value: Any, plane_prefix: IPv4Network | IPv6Network, last_number: int,
    last_subnet: IPv4Network | IPv6Network, native: list[IPv4Network] | list[IPv6Network], hosts: list[str],
) -> IPv4Network | IPv6Network:
    family = plane_prefix.version
    if value is None:
        if last_number < len(native):  # the last subnet is a rack's (or transit)
            raise TopologyError(
                source, where,
                f"no default: {plane_prefix} has no subnet left after its racks for the failover addresses "
                f"(the default is its last /{last_subnet.prefixlen}, {last_subnet}); give a free prefix inside it",
            )
        prefix = last_subnet
    else:
        prefix = _parse_prefix(source, where, value, family, last_subnet)
        # A plane's routers carry only that plane's prefix; its hosts route only it via the plane.
        if not prefix.subnet_of(plane_prefix):  # type: ignore[arg-type]
            raise TopologyError(source, where, f"{value} is outside the plane's {plane_prefix}; it must lie inside it")
    try:
        addressing.failover_addresses(prefix, hosts, native, option=where)
    except addressing.failover_address_error() as exc:
        reason = str(exc).removeprefix(f"{where}: ")
        raise TopologyError(source, where, reason) from None
    return prefix


def _prefix(
    source: str, where: str, value: Any, family: int, allowed: IPv4Network | IPv6Network, subnet_len: int, racks: int
) -> IPv4Network | IPv6Network:
    prefix = _parse_prefix(source, where, value, family, allowed)
    if not prefix.subnet_of(allowed):  # type: ignore[arg-type]
        raise TopologyError(source, where, f"{value} is outside {allowed}, the only range lab traffic may use")
    # Subnet 0 holds routed transit links, subnets 1..racks the racks.
    needed = math.ceil(math.log2(racks + 1))
    if prefix.prefixlen > subnet_len - needed:
        raise TopologyError(
            source, where, f"{value} is too small: {racks} racks need /{subnet_len} subnets 0..{racks}, "
            f"so at most a /{subnet_len - needed}"
        )
    return prefix


def _parse_prefix(
    source: str, where: str, value: Any, family: int, example: IPv4Network | IPv6Network
) -> IPv4Network | IPv6Network:
    if not isinstance(value, str):
        raise TopologyError(source, where, f"must be an IPv{family} prefix string like {example}")
    try:
        prefix = ip_network(value, strict=True)
    except ValueError as exc:
        raise TopologyError(source, where, f"invalid IPv{family} prefix {value!r}: {exc}") from None
    if prefix.version != family:
        raise TopologyError(source, where, f"{value} is not an IPv{family} prefix")
    return prefix


def _hosts_per_rack(source: str, value: Any, racks: int) -> tuple[int, ...]:
    if isinstance(value, list):
        if len(value) != racks:
            raise TopologyError(source, "hosts_per_rack", f"list has {len(value)} entries but racks is {racks}")
        return tuple(integer(source, f"hosts_per_rack[{i}]", v, 1, MAX_HOSTS_PER_RACK) for i, v in enumerate(value))
    return (integer(source, "hosts_per_rack", value, 1, MAX_HOSTS_PER_RACK),) * racks


def _check_lab_name(source: str, where: str, name: Any) -> None:
    if not isinstance(name, str) or not LAB_NAME_RE.match(name):
        raise TopologyError(
            source, where, f"lab name must be 1-32 lowercase letters, digits or inner dashes, not {name!r}"
        )


def _isl_dict(isl: bool | tuple[tuple[str, str], ...]) -> dict[str, Any]:
    if isl is True:
        return {"isl": True}
    return {"isl": [list(pair) for pair in isl]} if isl else {}


def _isl(source: str, value: Any, planes: tuple[PlaneSpec, ...]) -> bool | tuple[tuple[str, str], ...]:
    """fabric.isl: true or false, or a list of [plane, plane] pairs whose switches are joined."""
    if isinstance(value, bool):
        return value
    if not isinstance(value, list) or not value:
        raise TopologyError(source, "fabric.isl", f"must be true, false or a list of [plane, plane] pairs, not {value!r}")
    names = [p.name for p in planes]
    pairs: list[tuple[str, str]] = []
    for index, pair in enumerate(value):
        where = f"fabric.isl[{index}]"
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(n, str) for n in pair)):
            raise TopologyError(source, where, f"must be a pair of plane names, such as [a, b], not {pair!r}")
        unknown = [n for n in pair if n not in names]
        if unknown:
            raise TopologyError(source, where, f"unknown plane {unknown[0]!r} (planes: {', '.join(names)})")
        if pair[0] == pair[1]:
            raise TopologyError(source, where, f"joins plane {pair[0]!r} to itself")
        if tuple(sorted(pair)) in {tuple(sorted(p)) for p in pairs}:
            raise TopologyError(source, where, f"planes {pair[0]} and {pair[1]} are already joined")
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def _check_generated_names(topology: Topology) -> None:
    """Switch names double as port names in their neighbours, so they must fit IFNAMSIZ too."""
    for i, plane in enumerate(topology.planes):
        for name in switch_names(topology, plane.name):
            if len(name) > IFNAME_MAX:
                raise TopologyError(
                    topology.source,
                    f"planes[{i}].name",
                    f"switch {name!r} is {len(name)} characters, but it is also the name of its "
                    f"neighbours' ports and Linux allows at most {IFNAME_MAX}",
                )

"""backup_routes: what to change and the network plan, from declared, kernel and
recorded routes (pure; the kernel side is in test_backup_routes_module_netns.py)."""

from __future__ import annotations

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.backup_routes import changes, spec
from ansible_collections.edgeft.failover.plugins.module_utils.backup_routes.spec import OptionError

DECL = spec.normalize_routes([
    {"dst": "198.18.2.11/32", "via": [{"interface": "fab0"}, {"interface": "fab1"}], "rto_min_ms": 50},
    {"dst": "fd0e:d6ef:7a00:2::b/128", "via": [{"interface": "fab0"}, {"interface": "fab1", "gateway": "fd0e:d6ef:7b00:2::b"}]},
])
LINKS = {
    "fab0": {"ifindex": 2, "kind": "veth", "master": None, "addresses": ["198.18.1.11/16", "fd0e:d6ef:7a00:1::b/56", "fe80::1/64"]},
    "fab1": {"ifindex": 3, "kind": "veth", "master": None, "addresses": ["198.19.1.11/16", "fd0e:d6ef:7b00:1::b/56"]},
}


def kernel_route(route, proto=237, **changes_):
    out = dict(spec.stored(route), proto=proto, scope=0, restore={})
    out.update(changes_)
    return out


def current_of(routes, **kw):
    return {spec.route_key(r): kernel_route(r, **kw) for r in routes}


def test_fresh_host_adds_everything():
    rc = changes.route_changes(DECL, {}, [], set())
    assert rc.add == DECL and not rc.update and not rc.remove and rc.changed


def test_routes_in_place_are_kept_whatever_their_protocol():
    # A route a boot-time network configuration made from the persisted plan (proto static, 4)
    # does what is declared: nothing to do.
    rc = changes.route_changes(DECL, current_of(DECL, proto=4), [], set())
    assert rc.keep == DECL and not rc.changed and not rc.warnings


@pytest.mark.parametrize("field, value", [("dev", "fab9"), ("gateway", "198.18.1.1"), ("rto_min_ms", None), ("src", "198.18.1.11")])
def test_a_differing_route_is_replaced(field, value):
    current = current_of(DECL)
    key = spec.route_key(DECL[0])
    current[key][field] = value
    rc = changes.route_changes(DECL, current, [], {key})
    assert [r for r, _old in rc.update] == [DECL[0]] and rc.changed and not rc.warnings


def test_replacing_a_route_edgeft_did_not_install_warns():
    current = current_of(DECL)
    key = spec.route_key(DECL[0])
    current[key].update(dev="fab9", proto=3)
    rc = changes.route_changes(DECL, current, [], set())
    assert len(rc.update) == 1
    assert rc.warnings == ["routes[0].via[0]: replacing 198.18.2.11/32 dev fab9 metric 100 rto_min 50ms (proto 3), which edgeft "
                           "did not install, with the declared route"]


def test_the_kernels_own_routes_are_never_replaced():
    current = current_of(DECL)
    current[spec.route_key(DECL[2])].update(dev="fab1", proto=2)
    with pytest.raises(OptionError, match=r"routes\[1\]\.via\[0\]: the kernel's own route .* \(proto kernel\)"):
        changes.route_changes(DECL, current, [], set())


def test_multipath_hops_compare_regardless_of_order():
    (mp,) = spec.normalize_routes([{"dst": "198.51.100.0/24", "mode": "multipath", "weights": [1, 2],
                                    "via": [{"interface": "fab0", "gateway": "198.18.1.1"}, {"interface": "fab1", "gateway": "198.19.1.1"}]}])
    cur = kernel_route(mp, nexthops=list(reversed(mp["nexthops"])))
    assert changes.same_route(mp, cur)
    cur["nexthops"][0] = dict(cur["nexthops"][0], weight=3)
    assert not changes.same_route(mp, cur)
    assert not changes.same_route(mp, kernel_route(DECL[0]))


def test_removal_touches_only_routes_still_ours():
    gone, ours, replaced = (spec.stored(r) for r in DECL[:3])
    current = {spec.route_key(ours): kernel_route(ours), spec.route_key(replaced): kernel_route(replaced, proto=4)}
    rc = changes.route_changes([], current, [gone, ours, replaced], set())
    assert rc.remove == [current[spec.route_key(ours)]]
    assert rc.forget == [gone, replaced]
    assert len(rc.warnings) == 1 and "no longer edgeft's (proto 4)" in rc.warnings[0]


# ------------------------------------------------------------------ sysctls
def test_needed_sysctls_cover_every_via_interface_per_family():
    needed = changes.needed_sysctls(DECL)
    assert sorted(needed) == ["net.ipv4.conf.fab0.ignore_routes_with_linkdown", "net.ipv4.conf.fab1.ignore_routes_with_linkdown",
                              "net.ipv6.conf.fab0.ignore_routes_with_linkdown", "net.ipv6.conf.fab1.ignore_routes_with_linkdown"]
    assert needed["net.ipv4.conf.fab1.ignore_routes_with_linkdown"] == (4, "fab1", "routes[0].via[1].interface")
    assert "net.ipv4.conf.bond0/100.ignore_routes_with_linkdown" in changes.needed_sysctls(
        spec.normalize_routes([{"dst": "198.18.2.11/32", "via": [{"interface": "bond0.100"}]}]))


def test_sysctls_off_are_set_and_their_old_value_recorded():
    needed = changes.needed_sysctls(DECL[:2])
    values = {k: ("0", "0") for k in needed}
    writes, restores, after = changes.sysctl_changes(needed, values, {}, manage=True)
    assert writes == [(4, "fab0", "1", "0"), (4, "fab1", "1", "0")] and restores == []
    assert after == {k: "0" for k in needed}


def test_sysctls_already_in_effect_are_left_alone():
    needed = changes.needed_sysctls(DECL[:2])
    # fab0's own value is 0 but net.ipv4.conf.all is 1, which the kernel ORs in for IPv4.
    values = {k: ("0", "1") for k in needed}
    assert changes.sysctl_changes(needed, values, {}, manage=True) == ([], [], {})


def test_without_manage_an_off_sysctl_is_an_error_naming_the_interface_option():
    needed = changes.needed_sysctls(DECL[:2])
    values = {k: ("0", "0") for k in needed}
    with pytest.raises(OptionError, match=r"^routes\[0\]\.via\[0\]\.interface: net.ipv4.conf.fab0.ignore_routes_with_linkdown is 0"):
        changes.sysctl_changes(needed, values, {}, manage=False)


def test_sysctls_no_longer_needed_are_put_back_only_if_still_ours():
    recorded = {"net.ipv6.conf.fab0.ignore_routes_with_linkdown": "0", "net.ipv6.conf.fab1.ignore_routes_with_linkdown": "0",
                "net.ipv4.conf.gone.ignore_routes_with_linkdown": "0"}
    values = {"net.ipv6.conf.fab0.ignore_routes_with_linkdown": ("1", "1"),
              "net.ipv6.conf.fab1.ignore_routes_with_linkdown": ("0", "0"),  # someone changed it since
              "net.ipv4.conf.gone.ignore_routes_with_linkdown": (None, None)}
    writes, restores, after = changes.sysctl_changes({}, values, recorded, manage=True)
    assert writes == [] and restores == [(6, "fab0", "0")] and after == {}


# ------------------------------------------------------------- host checks
def test_host_problems():
    bad = spec.normalize_routes([{"dst": "198.18.2.11/32", "via": [{"interface": "fab7"}], "src": "198.18.9.9"},
                                 {"dst": "fd0e:d6ef:7a00:2::b/128", "via": [{"interface": "fab1"}]}])
    errors, warnings = changes.host_problems(bad, LINKS, check_mode=False)
    assert errors == ["routes[0].via[0].interface: there is no interface 'fab7' on this host",
                      "routes[0].src: 198.18.9.9 is not an address of this host (the kernel only sends from local addresses)"]
    assert len(warnings) == 1 and warnings[0].startswith("routes[1].via[0]: fd0e:d6ef:7a00:2::b/128 is not on-link on fab1")
    errors, warnings = changes.host_problems(bad, LINKS, check_mode=True)
    assert errors == ["routes[0].src: 198.18.9.9 is not an address of this host (the kernel only sends from local addresses)"]
    assert "a real run fails unless it is created first" in warnings[0]
    assert changes.host_problems(DECL, LINKS, check_mode=False) == ([], [])


# -------------------------------------------------------------------- plan
MP = spec.normalize_routes([{"dst": "198.18.3.0/24", "mode": "multipath", "rto_min_ms": 40,
                             "via": [{"interface": "fab1", "gateway": "198.19.1.1"}, {"interface": "fab0", "gateway": "198.18.1.1"}]}])


def test_plan_lists_routes_under_their_interface_in_the_shared_shape():
    plan = changes.build_plan(DECL + MP, LINKS)
    fab0, fab1 = plan["interfaces"]
    assert fab0["name"] == "fab0" and fab0["kind"] == "ethernet" and fab0["master"] is None
    assert fab0["routes"][0] == {"dst": "198.18.2.11/32", "gateway": None, "scope": "link", "metric": 100, "table": None,
                                 "src": None, "rto_min": 50}
    assert {"dst": "fd0e:d6ef:7a00:2::b/128", "gateway": "fd0e:d6ef:7b00:2::b", "scope": None, "metric": 200, "table": None,
            "src": None, "rto_min": None} in fab1["routes"]
    assert {"dst": "198.18.3.0/24", "metric": 100, "table": None, "src": None, "rto_min": 40,
            "nexthops": [{"dev": "fab1", "gateway": "198.19.1.1", "weight": 1},
                         {"dev": "fab0", "gateway": "198.18.1.1", "weight": 1}]} in fab1["routes"]
    for iface in plan["interfaces"]:
        assert set(iface) == {"name", "kind", "mtu", "addresses", "accept_ra", "routes", "rules", "bond", "master"}
    assert plan["sysctls"] == {k: "1" for k in sorted(changes.needed_sysctls(DECL + MP))}
    assert changes.build_plan([], LINKS) == {"interfaces": [], "sysctls": {}}


def test_a_route_through_a_bond_is_listed_under_the_bond():
    links = dict(LINKS, bond0={"ifindex": 9, "kind": "bond", "master": None, "addresses": ["198.18.1.11/16"]})
    routes = spec.normalize_routes([{"dst": "198.18.2.11/32", "via": [{"interface": "bond0"}, {"interface": "fab1"}]}])
    assert [(i["name"], i["kind"]) for i in changes.build_plan(routes, links)["interfaces"]] == [("bond0", "bond"), ("fab1", "ethernet")]


def test_a_bond_port_is_refused_as_via():
    links = dict(LINKS, bond0={"ifindex": 9, "kind": "bond", "master": None, "addresses": []})
    links["fab0"] = dict(LINKS["fab0"], master="bond0")
    errors, _warnings = changes.host_problems(DECL[:2], links, check_mode=False)
    assert errors == ["routes[0].via[0].interface: fab0 is a port of bond bond0; route through bond0"]


def test_the_persistence_renderer_accepts_the_plan():
    """Contract with plugins/module_utils/persist/plan.py, which refuses keys it cannot render."""
    persist = pytest.importorskip("ansible_collections.edgeft.failover.plugins.module_utils.persist.plan")
    normalized = persist.normalize_plan(changes.build_plan(DECL + MP, LINKS))
    routes = {(r["dst"], r["metric"]): r for iface in normalized["interfaces"] for r in iface["routes"]}
    assert routes[("198.18.2.11/32", 100)]["rto_min"] == 50 and routes[("198.18.2.11/32", 100)]["scope"] == "link"
    assert [h["weight"] for h in routes[("198.18.3.0/24", 100)]["nexthops"]] == [1, 1]
    assert normalized["sysctls"]["net.ipv4.conf.fab0.ignore_routes_with_linkdown"] == "1"

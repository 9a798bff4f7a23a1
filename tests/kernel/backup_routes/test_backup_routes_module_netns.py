"""edgeft.failover.backup_routes on the real kernel, in a namespace the test creates.

The namespace holds two "plane NICs" fab0 and fab1, each a veth whose other end
(p0, p1) stays in the namespace, so a test can take a NIC's carrier away by
setting its far end down. The module runs in-process with Ansible's real
argument parsing, check and diff mode (tests/helpers/nshost.run_module).
Nothing is mocked. Lab addresses only; the namespace is removed also when a
test fails. The fabric-level behaviour (traffic, ARP/ND across planes) is in
tests/lab/backup_routes/.
"""

from __future__ import annotations

import json
import os
import socket


import pytest

import hostlab as L
from nshost import ip_ns as sh, veth_netns

from ansible_collections.edgeft.failover.plugins.modules import backup_routes

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")

R4 = {"dst": "198.18.2.11/32", "via": [{"interface": "fab0"}, {"interface": "fab1"}], "rto_min_ms": 50}
R6 = {"dst": "fd0e:d6ef:7a00:2::b/128", "via": [{"interface": "fab0"}, {"interface": "fab1", "gateway": "fd0e:d6ef:7b00:2::b"}]}
MP = {"dst": "198.18.3.0/24", "mode": "multipath", "weights": [1, 3],
      "via": [{"interface": "fab0", "gateway": "198.18.1.1"}, {"interface": "fab1", "gateway": "198.19.1.1"}]}
SYSCTLS = ["net.ipv%d.conf.%s.ignore_routes_with_linkdown" % (f, nic) for f in (4, 6) for nic in ("fab0", "fab1")]


@pytest.fixture
def host(tmp_path):
    nics = [("fab0", "p0", ["198.18.1.11/16", "fd0e:d6ef:7a00:1::b/56"]),
            ("fab1", "p1", ["198.19.1.11/16", "fd0e:d6ef:7b00:1::b/56"])]
    with veth_netns("eft-br", nics) as ns:
        yield {"ns": ns, "state_dir": str(tmp_path / "state")}


def run(host, routes, check=False, **kw):
    """The module's result, with the warnings it gave (on a target, exit_json adds them)."""
    args = dict(routes=routes, state_dir=host["state_dir"], **kw)
    return L.run_module(backup_routes.main, json.loads(json.dumps(args)), host["ns"], check_mode=check)


def ok(result):
    assert not result.get("failed"), result.get("msg")
    return result


def routes(host):
    """Every route of the main table as `ip -j route` shows it (both families), minus the kernel's own."""
    out = []
    for fam in ("-4", "-6"):
        for r in json.loads(sh(host["ns"], "-j", fam, "route", "show", "table", "main")):
            r.setdefault("protocol", "boot")  # iproute2 leaves out the default protocol
            if r["protocol"] != "kernel":
                out.append(" ".join(str(r.get(k)) for k in ("dst", "gateway", "dev", "protocol", "metric", "prefsrc", "metrics")))
    return sorted(out)


def sysctls(host):
    with L.in_netns(host["ns"]):
        out = {}
        for key in SYSCTLS:
            with open("/proc/sys/" + key.replace(".", "/")) as f:
                out[key] = f.read().strip()
        return out


def snapshot(host):
    record = os.path.join(host["state_dir"], "backup_routes.json")
    return routes(host), sysctls(host), open(record).read() if os.path.exists(record) else None


def route_get(host, dst):
    """The interface the kernel sends a packet to dst through, right now."""
    family = socket.AF_INET6 if ":" in dst else socket.AF_INET
    with L.in_netns(host["ns"]):
        from pyroute2 import IPRoute
        with IPRoute() as ipr:
            (found,) = ipr.route("get", dst=dst, family=family)
            return ipr.get_links(found.get_attr("RTA_OIF"))[0].get_attr("IFLA_IFNAME")


def test_install_then_idempotent(host):
    first = ok(run(host, [R4, R6, MP]))
    assert first["changed"] and len(first["added"]) == 5 and first["removed"] == []
    assert first["sysctls"]["set"] == {k: "1" for k in SYSCTLS}
    assert sysctls(host) == {k: "1" for k in SYSCTLS}
    shown = sh(host["ns"], "-4", "route", "show", "198.18.2.11")
    assert "dev fab0 proto 237 scope link metric 100 rto_min lock 50ms" in shown
    assert "dev fab1 proto 237 scope link metric 200 rto_min lock 50ms" in shown
    six = sh(host["ns"], "-6", "route", "show", "fd0e:d6ef:7a00:2::b")
    assert "dev fab0 proto 237 metric 100" in six and "via fd0e:d6ef:7b00:2::b dev fab1 proto 237 metric 200" in six
    mp = sh(host["ns"], "-4", "route", "show", "198.18.3.0/24")
    assert "nexthop via 198.18.1.1 dev fab0 weight 1" in mp and "nexthop via 198.19.1.1 dev fab1 weight 3" in mp
    record = json.load(open(os.path.join(host["state_dir"], "backup_routes.json")))
    (entry,) = record["namespaces"].values()
    assert len(entry["routes"]) == 5 and entry["sysctls"] == {k: "0" for k in SYSCTLS}

    before = snapshot(host)
    second = ok(run(host, [R4, R6, MP]))
    assert not second["changed"] and second["added"] == second["updated"] == second["removed"] == []
    assert second["diff"]["before"] == second["diff"]["after"]
    assert snapshot(host) == before


def test_rto_min_reads_back_as_a_locked_route_metric(host):
    ok(run(host, [R4]))
    with L.in_netns(host["ns"]):
        from pyroute2 import IPRoute
        with IPRoute() as ipr:
            found = list(ipr.get_routes(family=socket.AF_INET, proto=237))
    assert len(found) == 2
    for r in found:
        metrics = r.get_attr("RTA_METRICS")
        assert metrics.get_attr("RTAX_RTO_MIN") == 50
        assert metrics.get_attr("RTAX_LOCK") & (1 << 13)  # TCP ignores an unlocked rto_min


def test_carrier_loss_moves_the_destination_to_the_next_metric(host):
    ok(run(host, [R4, R6]))
    assert route_get(host, "198.18.2.11") == "fab0" and route_get(host, "fd0e:d6ef:7a00:2::b") == "fab0"
    sh(host["ns"], "link", "set", "p0", "down")  # fab0 stays up, without carrier
    assert route_get(host, "198.18.2.11") == "fab1" and route_get(host, "fd0e:d6ef:7a00:2::b") == "fab1"
    sh(host["ns"], "link", "set", "p0", "up")
    assert route_get(host, "198.18.2.11") == "fab0"


def test_without_ignore_routes_with_linkdown_the_kernel_keeps_the_dead_route(host):
    """Why the module sets the sysctl: with it off, a NIC without carrier keeps its routes."""
    ok(run(host, [R4]))
    with L.in_netns(host["ns"]):
        with open("/proc/sys/net/ipv4/conf/fab0/ignore_routes_with_linkdown", "w") as f:
            f.write("0\n")
    sh(host["ns"], "link", "set", "p0", "down")
    assert route_get(host, "198.18.2.11") == "fab0"
    fixed = ok(run(host, [R4]))  # the next run puts it back
    assert fixed["changed"] and fixed["sysctls"]["set"] == {"net.ipv4.conf.fab0.ignore_routes_with_linkdown": "1"}
    assert route_get(host, "198.18.2.11") == "fab1"


def test_check_mode_changes_nothing(host):
    before = snapshot(host)
    result = ok(run(host, [R4, R6], check=True))
    assert result["changed"] and len(result["added"]) == 4
    assert result["diff"]["before"]["routes"] == [] and len(result["diff"]["after"]["routes"]) == 4
    assert snapshot(host) == before and not os.path.exists(host["state_dir"])
    ok(run(host, [R4, R6]))
    before = snapshot(host)
    result = ok(run(host, [R4], check=True))
    assert result["changed"] and len(result["removed"]) == 2
    assert snapshot(host) == before


def test_exact_set_removes_only_what_is_no_longer_declared(host):
    ok(run(host, [R4, R6, MP]))
    kept_before = [r for r in routes(host) if not r.startswith("fd0e")]
    result = ok(run(host, [R4, MP]))
    assert sorted(result["removed"]) == ["fd0e:d6ef:7a00:2::b/128 dev fab0 metric 100",
                                         "fd0e:d6ef:7a00:2::b/128 via fd0e:d6ef:7b00:2::b dev fab1 metric 200"]
    assert result["added"] == [] and result["updated"] == []
    assert routes(host) == kept_before
    # no IPv6 route goes through the NICs any more: the IPv6 sysctls are back to what they were
    assert result["sysctls"]["restored"] == {"net.ipv6.conf.fab0.ignore_routes_with_linkdown": "0",
                                             "net.ipv6.conf.fab1.ignore_routes_with_linkdown": "0"}
    assert sysctls(host)["net.ipv6.conf.fab0.ignore_routes_with_linkdown"] == "0"
    assert sysctls(host)["net.ipv4.conf.fab0.ignore_routes_with_linkdown"] == "1"


def test_routes_it_did_not_install_are_never_removed(host):
    sh(host["ns"], "route", "add", "198.18.2.12/32", "dev", "fab0", "metric", "100")  # proto boot
    ok(run(host, [R4]))
    ok(run(host, []))
    assert routes(host) == ["198.18.2.12 None fab0 boot 100 None None"]
    assert sysctls(host) == {k: "0" for k in SYSCTLS}


def test_a_foreign_route_at_a_declared_destination_and_metric_is_replaced_with_a_warning(host):
    sh(host["ns"], "route", "add", "198.18.2.11/32", "dev", "fab1", "metric", "100")
    result = ok(run(host, [R4]))
    assert result["updated"] == ["198.18.2.11/32 dev fab0 metric 100 rto_min 50ms"]
    assert any("which edgeft did not install" in w for w in result["warnings"])
    assert "198.18.2.11 None fab0 237 100" in " ".join(routes(host))


def test_the_kernels_own_route_is_refused_and_nothing_changes(host):
    before = snapshot(host)
    # fab0's connected IPv6 prefix has metric 256 (proto kernel)
    result = run(host, [R4, {"dst": "fd0e:d6ef:7a00::/56", "via": [{"interface": "fab1", "gateway": "fd0e:d6ef:7b00:1::1", "metric": 256}]}])
    assert result["failed"] and result["msg"].startswith("routes[1].via[0]: the kernel's own route")
    assert snapshot(host) == before


def test_a_kernel_failure_part_way_rolls_everything_back(host):
    ok(run(host, [R6]))
    before = snapshot(host)
    # The gateway is not on-link on fab1: the kernel refuses the second route, after the first went in.
    bad = {"dst": "198.18.2.11/32", "via": [{"interface": "fab0"}, {"interface": "fab1", "gateway": "198.18.99.1"}]}
    result = run(host, [bad, R6])
    assert result["failed"]
    assert result["msg"].startswith("backup_routes: routes[0].via[1]: adding 198.18.2.11/32 via 198.18.99.1 dev fab1 metric 200 failed")
    assert result["msg"].endswith("rolled back, nothing was changed")
    assert snapshot(host) == before


def test_a_missing_interface_fails_before_any_change_and_only_warns_in_check_mode(host):
    before = snapshot(host)
    decl = [R4, {"dst": "198.18.2.12/32", "via": [{"interface": "bond0"}]}]
    result = run(host, decl)
    assert result["failed"] and result["msg"] == "routes[1].via[0].interface: there is no interface 'bond0' on this host"
    assert snapshot(host) == before
    checked = ok(run(host, decl, check=True))
    assert checked["changed"] and any("bond0" in w and "created first" in w for w in checked["warnings"])
    assert snapshot(host) == before


def test_set_ignore_linkdown_false_only_checks(host):
    before = snapshot(host)
    result = run(host, [R4], set_ignore_linkdown=False)
    assert result["failed"] and result["msg"].startswith(
        "routes[0].via[0].interface: net.ipv4.conf.fab0.ignore_routes_with_linkdown is 0 on this host")
    assert snapshot(host) == before
    with L.in_netns(host["ns"]):
        with open("/proc/sys/net/ipv4/conf/all/ignore_routes_with_linkdown", "w") as f:
            f.write("1\n")  # the kernel ORs "all" into every IPv4 interface's value
    result = ok(run(host, [R4], set_ignore_linkdown=False))
    assert result["changed"] and result["sysctls"]["set"] == {}


def test_absent_removes_recorded_routes_by_destination_or_all(host):
    ok(run(host, [R4, R6, MP]))
    result = ok(run(host, [{"dst": "198.18.3.0/24"}], state="absent"))
    assert [r.split()[0] for r in result["removed"]] == ["198.18.3.0/24"]
    assert len(routes(host)) == 4
    again = ok(run(host, [{"dst": "198.18.3.0/24"}], state="absent"))
    assert not again["changed"]
    result = ok(run(host, [], state="absent"))
    assert len(result["removed"]) == 4 and routes(host) == []
    assert sysctls(host) == {k: "0" for k in SYSCTLS}
    (entries,) = [json.load(open(os.path.join(host["state_dir"], "backup_routes.json")))["namespaces"]]
    assert entries == {}


def test_a_route_deleted_with_its_nic_comes_back_on_the_next_run(host):
    ok(run(host, [R4]))
    sh(host["ns"], "link", "set", "fab0", "down")  # the kernel deletes routes through a NIC set down
    sh(host["ns"], "link", "set", "fab0", "up")
    result = ok(run(host, [R4]))
    assert result["added"] == ["198.18.2.11/32 dev fab0 metric 100 rto_min 50ms"]
    assert not ok(run(host, [R4]))["changed"]


def test_bad_input_names_the_option(host):
    result = run(host, [dict(R4, weights=[1, 2])])
    assert result["failed"] and result["msg"].startswith("routes[0].weights: weights apply to mode multipath only")
    result = run(host, [R4], state="sideways")
    assert result["failed"] and "state" in result["msg"]

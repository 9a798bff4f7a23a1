"""backup_routes declaration: normalisation and every validation rule (pure, no kernel)."""

from __future__ import annotations

import pytest

from ansible_collections.edgeft.failover.plugins.filter.backup_routes import backup_route_refusal
from ansible_collections.edgeft.failover.plugins.module_utils.backup_routes import spec
from ansible_collections.edgeft.failover.plugins.module_utils.backup_routes.spec import OptionError

V4 = {"dst": "198.18.2.11/32", "via": [{"interface": "fab0"}, {"interface": "fab1"}]}
V6 = {"dst": "fd0e:d6ef:7a00:2::b/128", "via": [{"interface": "fab0"}, {"interface": "fab1", "gateway": "fd0e:d6ef:7b00:2::b"}]}
MP = {"dst": "198.51.100.0/24", "mode": "multipath",
      "via": [{"interface": "fab0", "gateway": "198.18.1.1"}, {"interface": "fab1", "gateway": "198.19.1.1"}]}


def test_metric_mode_gives_one_route_per_via_with_increasing_default_metrics():
    routes = spec.normalize_routes([V4])
    assert [(r["dev"], r["gateway"], r["metric"], r["nexthops"]) for r in routes] == [("fab0", None, 100, None), ("fab1", None, 200, None)]
    assert [r["where"] for r in routes] == ["routes[0].via[0]", "routes[0].via[1]"]
    assert {r["family"] for r in routes} == {4}


def test_explicit_metrics_and_defaults_mix_when_increasing():
    vias = [{"interface": "fab0", "metric": 10}, {"interface": "fab1"}, {"interface": "fab2", "metric": 1000}]
    routes = spec.normalize_routes([{"dst": "198.18.2.11/32", "via": vias}])
    assert [r["metric"] for r in routes] == [10, 200, 1000]


def test_bare_address_is_a_host_route_and_ipv6_is_normalised():
    routes = spec.normalize_routes([dict(V4, dst="198.18.2.11"), dict(V6, dst="FD0E:D6EF:7A00:2:0::B")])
    assert {r["dst"] for r in routes} == {"198.18.2.11/32", "fd0e:d6ef:7a00:2::b/128"}


def test_multipath_gives_one_route_with_weighted_nexthops():
    (route,) = spec.normalize_routes([dict(MP, weights=[1, 3], rto_min_ms=40)])
    assert route["metric"] == 100 and route["dev"] is None and route["rto_min_ms"] == 40
    assert route["nexthops"] == [{"dev": "fab0", "gateway": "198.18.1.1", "weight": 1}, {"dev": "fab1", "gateway": "198.19.1.1", "weight": 3}]
    assert route["where"] == "routes[0]"


def test_ansible_fills_unset_suboptions_with_none():
    route = dict(V4, mode=None, weights=None, metric=None, src=None, rto_min_ms=None,
                 via=[{"interface": "fab0", "gateway": None, "metric": None}])
    assert spec.normalize_routes([route])[0]["metric"] == 100


def test_route_text_reads_like_ip_route():
    (route,) = spec.normalize_routes([dict(MP, weights=[2, 1], src="198.18.1.11", rto_min_ms=50)])
    assert spec.route_text(route) == ("198.51.100.0/24 nexthop via 198.18.1.1 dev fab0 weight 2 nexthop via 198.19.1.1 dev fab1 "
                                      "weight 1 src 198.18.1.11 metric 100 rto_min 50ms")


@pytest.mark.parametrize("routes, message", [
    ("x", "routes: expected a list"),
    ([42], "routes[0]: expected a dict"),
    ([dict(V4, dst="198.18.2.300/32")], "routes[0].dst: '198.18.2.300/32' is not a CIDR prefix"),
    ([dict(V4, dst="fab0")], "routes[0].dst: 'fab0' is not a CIDR prefix"),
    ([dict(V4, dst="")], "routes[0].dst: a destination prefix is required"),
    ([dict(V4, dst="198.18.2.11/16")], "routes[0].dst: 198.18.2.11/16 has host bits set; the prefix is 198.18.0.0/16"),
    ([dict(V4, mode="ecmp")], "routes[0].mode: 'ecmp' is not one of metric, multipath"),
    ([dict(V4, via=[])], "routes[0].via: at least one next hop is required"),
    ([dict(V4, via=None)], "routes[0].via: at least one next hop is required"),
    ([dict(V4, via=["fab0"])], "routes[0].via[0]: expected a dict"),
    ([dict(V4, via=[{"gateway": "198.18.1.1"}])], "routes[0].via[0].interface: the interface name is required"),
    ([dict(V4, via=[{"interface": "a-very-long-interface"}])], "routes[0].via[0].interface: 'a-very-long-interface' is not a valid"),
    ([dict(V4, via=[{"interface": "fab0", "gateway": "fd0e::1"}])],
     "routes[0].via[0].gateway: fd0e::1 is IPv6 but the destination is IPv4"),
    ([dict(V6, via=[{"interface": "fab0", "gateway": "198.18.1.1"}])],
     "routes[0].via[0].gateway: 198.18.1.1 is IPv4 but the destination is IPv6"),
    ([dict(V4, via=[{"interface": "fab0", "gateway": "198.18.1.1/16"}])], "routes[0].via[0].gateway: '198.18.1.1/16' is not an IP address"),
    ([dict(V4, via=[{"interface": "fab0", "gateway": "224.0.0.1"}])], "routes[0].via[0].gateway: 224.0.0.1 cannot be a next hop"),
    ([dict(V4, via=[{"interface": "fab0"}, {"interface": "fab0"}])], "routes[0].via[1]: dev fab0 is already a next hop at routes[0].via[0]"),
    ([dict(V4, via=[{"interface": "fab0", "metric": 200}, {"interface": "fab1"}])],
     "routes[0].via[1].metric: 200 collides with the metric of routes[0].via[0] (200)"),
    ([dict(V4, via=[{"interface": "fab0", "metric": 300}, {"interface": "fab1", "metric": 100}])],
     "routes[0].via[1].metric: 100 is lower than the metric of routes[0].via[0] (300)"),
    ([dict(V4, via=[{"interface": "fab0", "metric": 0}])], "routes[0].via[0].metric: 0 is out of range (1 to 4294967295)"),
    ([dict(V4, via=[{"interface": "fab0", "metric": "ten"}])], "routes[0].via[0].metric: 'ten' is not an integer"),
    ([dict(V4, weights=[1, 2])], "routes[0].weights: weights apply to mode multipath only"),
    ([dict(V4, metric=50)], "routes[0].metric: with mode metric each via has its own metric"),
    ([dict(MP, weights=[1])], "routes[0].weights: give one weight per via (2)"),
    ([dict(MP, weights=[1, 0])], "routes[0].weights[1]: 0 is out of range (1 to 256)"),
    ([dict(MP, weights=[1, 257])], "routes[0].weights[1]: 257 is out of range (1 to 256)"),
    ([dict(MP, via=MP["via"][:1])], "routes[0].via: mode multipath needs at least two next hops"),
    ([dict(MP, via=[dict(MP["via"][0], metric=5), MP["via"][1]])], "routes[0].via[0].metric: per-via metrics apply to mode metric only"),
    ([dict(V6, mode="multipath")], "routes[0].via[0].gateway: an IPv6 multipath next hop needs a gateway"),
    ([dict(V4, rto_min_ms=0)], "routes[0].rto_min_ms: 0 is out of range (1 to 120000)"),
    ([dict(V4, rto_min_ms=120001)], "routes[0].rto_min_ms: 120001 is out of range (1 to 120000)"),
    ([dict(V4, src="fd0e::1")], "routes[0].src: fd0e::1 is IPv6 but the destination is IPv4"),
    ([dict(V4, src="nope")], "routes[0].src: 'nope' is not an IP address"),
    ([V4, dict(V4, dst="198.18.2.11")], "routes[1].dst: 198.18.2.11/32 is already declared at routes[0].dst"),
    ([dict(V4, table=100)], "routes[0]: unknown option table"),
    ([dict(V4, via=[{"interface": "fab0", "onlink": True}])], "routes[0].via[0]: unknown option onlink"),
])
def test_bad_declarations_name_the_option(routes, message):
    with pytest.raises(OptionError) as err:
        spec.normalize_routes(routes)
    assert message in str(err.value)


def test_absent_needs_only_destinations():
    assert spec.normalize_destinations([{"dst": "198.18.2.11"}, {"dst": "fd0e:d6ef:7a00:2::b/128"}]) == {
        (4, "198.18.2.11/32"), (6, "fd0e:d6ef:7a00:2::b/128")}
    with pytest.raises(OptionError, match=r"routes\[0\]\.dst: 198.18.2.11/8 has host bits set"):
        spec.normalize_destinations([{"dst": "198.18.2.11/8"}])


@pytest.mark.parametrize("routes, message", [
    ([V4, dict(V4, dst="198.18.2.11")], "edgeft_backup_routes[1].dst: 198.18.2.11/32 is already declared at edgeft_backup_routes[0].dst"),
    ([dict(V4, dst="198.18.2.0/16")], "edgeft_backup_routes[0].dst: 198.18.2.0/16 has host bits set"),
    ([dict(V4, via=[{"interface": "fab0", "metric": 300}, {"interface": "fab1", "metric": 200}])],
     "edgeft_backup_routes[0].via[1].metric: 200"),
    ([dict(V4, weights=[1, 2])], "edgeft_backup_routes[0].weights: weights apply to mode multipath only"),
    ("198.18.2.11/32", "edgeft_backup_routes: expected a list of routes"),
])
def test_site_refuses_what_the_module_would_with_the_inventory_name(routes, message):
    """site.yml asserts on backup_route_refusal before any role runs (the routes are set last):
    the module's own validation, naming the inventory variable."""
    assert message in backup_route_refusal(routes)
    with pytest.raises(OptionError) as refused:
        spec.normalize_routes(routes)
    assert backup_route_refusal(routes, option="routes") == str(refused.value)


def test_site_accepts_what_the_module_accepts():
    assert backup_route_refusal([V4, V6, MP]) == ""

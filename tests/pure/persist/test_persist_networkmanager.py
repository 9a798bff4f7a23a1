"""The NetworkManager keyfiles, read by libnm's own keyfile reader (the code the daemon loads them with).

Every profile must load without a warning, normalise and verify as NetworkManager does when
it reads the file, and every key we wrote must survive libnm writing the profile back (a key
it does not know would be dropped silently). Then the loaded settings must say what the plan
says: addresses, routes with their attributes (a multipath route split into weighted routes
in the profile of each next hop's NIC), rules, bond options, MTU, ports. NetworkManager
itself is not run (it would manage the machine's interfaces); the NetworkManager.conf drop-in
is read with GLib's keyfile parser, which is the format's parser but not the daemon's check
of its keys.
"""

from __future__ import annotations

import ipaddress

import pytest

import persist_render as rendering


def _problem():
    try:
        import gi

        gi.require_version("NM", "1.0")
        from gi.repository import NM  # noqa: F401
    except (ImportError, ValueError) as exc:
        return "libnm's Python bindings are missing (packages gir1.2-nm-1.0 and python3-gi): %s" % exc
    return None


pytestmark = pytest.mark.skipif(_problem() is not None, reason=str(_problem()))

SCOPES = {"global": 0, "site": 200, "link": 253, "host": 254}
DIRECTORY = "/etc/NetworkManager/system-connections"


def load(text):
    """(connection, warnings, keyfile) as NetworkManager reads a keyfile."""
    from gi.repository import NM, GLib

    keyfile = GLib.KeyFile()
    keyfile.load_from_data(text, len(text.encode()), GLib.KeyFileFlags.NONE)
    warnings = []

    def handler(_keyfile, _connection, handler_type, data, _user_data):
        if handler_type == NM.KeyfileHandlerType.WARN:
            warnings.append(data.warn_get()[0])
        return False

    connection = NM.keyfile_read(keyfile, DIRECTORY, NM.KeyfileHandlerFlags.NONE, handler, None)
    assert connection.normalize(), "libnm could not normalise the profile"
    assert connection.verify()
    return connection, warnings, keyfile


def entries(keyfile):
    return {(group, key): keyfile.get_value(group, key) for group in keyfile.get_groups()[0] for key in keyfile.get_keys(group)[0]}


@pytest.fixture(params=["fabric", "lacp"])
def profiles(request):
    plan = rendering.load_plan(request.param)
    files = rendering.render(plan, "networkmanager")
    normalized = rendering.info(plan, "networkmanager")["plan"]
    return normalized, {path.rsplit("/", 1)[1]: text for path, (text, _mode) in files.items()
                        if path.startswith("etc/NetworkManager/system-connections/")}, files


def test_libnm_loads_every_profile_and_keeps_every_key(profiles):
    from gi.repository import NM

    plan, keyfiles, _files = profiles
    assert sorted(keyfiles) == sorted("60-edgeft-%s.nmconnection" % i["name"] for i in plan["interfaces"])
    for name, text in keyfiles.items():
        connection, warnings, keyfile = load(text)
        assert warnings == [], "%s: %s" % (name, warnings)
        written = entries(NM.keyfile_write(connection, NM.KeyfileHandlerFlags.NONE, None, None))
        for (group, key), value in entries(keyfile).items():
            assert (group, key) in written, "%s: [%s] %s is not a key libnm knows (it writes %s)" % (name, group, key, sorted(written))
            if key.startswith("routing-rule"):
                continue  # libnm prints a full-length source without its /32 or /128; compared below
            if key.endswith("_options"):
                value, written_value = sorted(value.split(",")), sorted(written[(group, key)].split(","))
            else:
                written_value = written[(group, key)]
            assert value == written_value, "%s: [%s] %s=%s reads back as %s" % (name, group, key, value, written_value)


def _route_attributes(route):
    return {name: route.get_attribute(name).unpack() for name in route.get_attribute_names()}


def expected_routes(plan, iface, family):
    """(dest, prefix, next hop, metric, attributes) NetworkManager must hold for iface, family."""
    out = []
    for route in iface["routes"]:
        if route["family"] != family or route["nexthops"]:
            continue
        out.append((route, route["gateway"], {}))
    if family == 4:
        for owner in plan["interfaces"]:
            for route in owner["routes"]:
                if route["family"] == 4:
                    out.extend((route, nh["gateway"], dict({"weight": nh["weight"] or 1}, **({"onlink": True} if nh["onlink"] else {})))
                               for nh in route["nexthops"] if nh["dev"] == iface["name"])
    result = []
    for route, gateway, extra in out:
        net = ipaddress.ip_network(route["dst"])
        attributes = dict(extra)
        if route["table"]:
            attributes["table"] = route["table"]
        if route["rto_min"]:
            attributes["rto_min"] = route["rto_min"]
        if route["src"]:
            attributes["src"] = route["src"]
        if route["onlink"]:
            attributes["onlink"] = True
        if route["scope"] and family == 4:
            attributes["scope"] = SCOPES[route["scope"]]
        result.append((str(net.network_address), net.prefixlen, gateway, -1 if route["metric"] is None else route["metric"], attributes))
    return sorted(result, key=repr)


def test_profiles_hold_the_plan(profiles):
    plan, keyfiles, _files = profiles
    for iface in plan["interfaces"]:
        connection, _warnings, _keyfile = load(keyfiles["60-edgeft-%s.nmconnection" % iface["name"]])
        setting = connection.get_setting_connection()
        assert setting.get_interface_name() == iface["name"]
        assert connection.get_connection_type() == ("bond" if iface["kind"] == "bond" else "802-3-ethernet")
        wired = connection.get_setting_wired()
        assert (wired.get_mtu() if wired else 0) == (iface["mtu"] or 0)
        if iface["kind"] == "bond-port":
            assert (setting.get_master(), setting.get_slave_type()) == (iface["master"], "bond")
            assert connection.get_setting_ip4_config() is None and connection.get_setting_ip6_config() is None
            continue
        if iface["bond"]:
            bond = connection.get_setting_bond()
            got = {bond.get_option(i)[1]: bond.get_option(i)[2] for i in range(bond.get_num_options())}
            want = {k: (",".join(v) if isinstance(v, list) else str(v)) for k, v in iface["bond"].items() if v not in (None, [])}
            assert got == want
        for family, ip in ((4, connection.get_setting_ip4_config()), (6, connection.get_setting_ip6_config())):
            addresses = ["%s/%d" % (a.get_address(), a.get_prefix()) for a in (ip.get_address(i) for i in range(ip.get_num_addresses()))]
            assert addresses == [a["address"] for a in iface["addresses"] if a["family"] == family]
            if family == 6:
                assert ip.get_method() == ("auto" if iface["accept_ra"] else ("manual" if addresses else "link-local"))
            routes = sorted(((r.get_dest(), r.get_prefix(), r.get_next_hop(), r.get_metric(), _route_attributes(r))
                             for r in (ip.get_route(i) for i in range(ip.get_num_routes()))), key=repr)
            assert routes == expected_routes(plan, iface, family)
            rules = [ip.get_routing_rule(i) for i in range(ip.get_num_routing_rules())]
            got_rules = [(r.get_priority(), r.get_from() and "%s/%d" % (r.get_from(), r.get_from_len()), r.get_table()) for r in rules]
            want_rules = [(r["priority"], r["from"], r["table"]) for r in iface["rules"] if r["family"] == family]
            assert got_rules == want_rules
            assert all(r.validate() for r in rules)


def test_ignore_carrier_drop_in(profiles):
    from gi.repository import GLib

    plan, _keyfiles, files = profiles
    text, mode = files["etc/NetworkManager/conf.d/60-edgeft.conf"]
    keyfile = GLib.KeyFile()
    keyfile.load_from_data(text, len(text.encode()), GLib.KeyFileFlags.NONE)
    groups = keyfile.get_groups()[0]
    assert len(groups) == 1 and groups[0].startswith("device")  # NetworkManager.conf(5): per-device sections
    assert keyfile.get_value(groups[0], "ignore-carrier") == "yes"
    nics = [i["name"] for i in plan["interfaces"] if i["kind"] != "bond"]
    assert keyfile.get_value(groups[0], "match-device") == ",".join("interface-name:%s" % n for n in nics)
    assert mode == "0644"

"""restore.py: the recorded arguments get the modules' own defaults; bad records are refused."""

from __future__ import annotations

import json

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils import restore
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.peers import spec as peers
from ansible_collections.edgeft.failover.plugins.module_utils.program import spec


def test_defaults_come_from_the_modules_argument_specs():
    params = restore.with_defaults(spec.ARGUMENT_SPEC, {
        "src": "/x/failover_tc.c", "pin_root": "/sys/fs/bpf/edgeft",
        "attach": [{"interface": "fab0", "direction": "egress", "plane": 0}]})
    assert params["state"] == "present" and params["include_dirs"] == [] and params["state_dir"] == "/var/lib/edgeft"
    assert params["attach"][0]["priority"] == spec.DEFAULT_PRIORITY and params["attach"][0]["handle"] == spec.DEFAULT_HANDLE
    table = restore.with_defaults(peers.ARGUMENT_SPEC, {
        "pin_root": "/p", "planes": [{"name": "a", "interface": "fab0"}],
        "peers": [{"name": "h2", "planes": [{"name": "a", "ipv4": "198.18.1.12"}]}]})
    assert table["neighbors"] is True and table["peers"][0]["learn"] is True and table["peers"][0]["identity"] == []
    assert table["peers"][0]["planes"][0]["ipv6"] is None


def test_defaults_are_not_shared_between_calls():
    first = restore.with_defaults(spec.ARGUMENT_SPEC, {"pin_root": "/p", "attach": []})
    first["include_dirs"].append("/tmp")
    assert restore.with_defaults(spec.ARGUMENT_SPEC, {"pin_root": "/p", "attach": []})["include_dirs"] == []


@pytest.mark.parametrize("content,message", [
    (None, "cannot read"),
    ("{not json", "is not valid JSON"),
    (json.dumps({"ebpf_program": {}}), "has no peer_table arguments"),
])
def test_bad_records_are_refused(tmp_path, content, message):
    path = tmp_path / "datapath.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(restore.RestoreError, match=message):
        restore.load(str(path))


def test_an_unknown_argument_is_refused():
    with pytest.raises(restore.RestoreError, match="unknown argument 'colour'"):
        restore.with_defaults(peers.ARGUMENT_SPEC, {"pin_root": "/p", "planes": [], "peers": [], "colour": 1})


# The datapath module's core (restore.run): what is refused before either step changes anything.
# None of these reaches the kernel: a refusal that came too late would fail differently here
# (the program step needs root and pinned maps).
@pytest.mark.parametrize("params, message", [
    ({"ebpf_program": {"pin_root": "/p", "attach": [], "colour": "red"}, "peer_table": {}},
     "ebpf_program: unknown argument 'colour'"),
    ({"ebpf_program": {"pin_root": "/p", "attach": [{"interface": "fab0", "direction": "egress", "shape": 1}]},
      "peer_table": {}}, r"ebpf_program.attach\[0\]: unknown argument 'shape'"),
    ({"ebpf_program": {"pin_root": "/p", "attach": []}, "peer_table": {}, "record": "datapath.json"},
     "record: 'datapath.json' must be an absolute path"),
    ({"ebpf_program": {"pin_root": "/p", "attach": []}, "peer_table": {}, "prune_objects": "/usr/local/lib/edgeft/bpf"},
     "prune_objects: needs record"),
])
def test_the_datapath_module_refuses_bad_input_before_any_step(params, message):
    with pytest.raises(EdgeftError, match=message):
        restore.run(params)

"""edgeft.failover.host_files through ansible-playbook (local connection, everything under the
test's own directory): one module run when nothing differs, two when something does, none
changed in check mode; the diff shows the controller's text; bad input is refused naming the
option, with nothing changed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from repo import REPO, playbook_env

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="installs root-owned files"),
    pytest.mark.skipif(shutil.which("ansible-playbook") is None, reason="ansible-playbook not on PATH"),
]

PLAY = """
- name: Install files with host_files
  hosts: target
  gather_facts: false
  tasks:
    - name: Install them
      edgeft.failover.host_files:
        directories: [{path: "{{ root }}/etc/edgeft"}]
        files:
          - {src: "%(launcher)s", dest: "{{ root }}/lib/edgeft-agent", mode: "0755"}
          - {content: "{{ text }}", dest: "{{ root }}/etc/edgeft/agent.json"}
          %(extra)s
        links: [{dest: "{{ root }}/sbin/edgeft-agent", src: "{{ root }}/lib/edgeft-agent"}]
"""
RECAP = re.compile(r"^target\s*: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
# With pipelining, one python3 started per module run (-vvv shows each).
MODULE_RUN = re.compile(r"^<target> EXEC /bin/sh -c '/usr/bin/python3 && sleep 0'$", re.M)


def play(tmp_path, *options, text="{}", extra=""):
    (tmp_path / "inventory.yml").write_text(
        "all:\n  hosts:\n    target:\n      ansible_connection: local\n      ansible_python_interpreter: /usr/bin/python3\n")
    (tmp_path / "play.yml").write_text(PLAY % {"launcher": REPO / "bin" / "edgeft-agent", "extra": extra})
    proc = subprocess.run(["ansible-playbook", "-vvv", "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml"),
                           "-e", "root=%s" % (tmp_path / "root"), "-e", "text=%s" % text] + list(options),
                          cwd=tmp_path, env=playbook_env(ANSIBLE_PIPELINING="1"), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    recap = RECAP.search(out)
    assert recap, out[-4000:]
    return int(recap.group(2)), int(recap.group(4)), len(MODULE_RUN.findall(out)), out


def test_one_module_run_when_nothing_differs_two_when_something_does(tmp_path):
    root = tmp_path / "root"
    assert play(tmp_path)[:3] == (1, 0, 2)
    assert (root / "lib/edgeft-agent").read_bytes() == (REPO / "bin" / "edgeft-agent").read_bytes()
    assert (root / "etc/edgeft/agent.json").read_text() == "{}"
    assert os.readlink(root / "sbin/edgeft-agent") == str(root / "lib/edgeft-agent")
    assert play(tmp_path)[:3] == (0, 0, 1)

    changed, failed, runs, out = play(tmp_path, "--check", "--diff", text='{"new":1}')
    assert (changed, failed, runs) == (1, 0, 1), out[-4000:]
    assert '+{"new":1}' in out and (root / "etc/edgeft/agent.json").read_text() == "{}"

    assert play(tmp_path, text='{"new":1}')[:3] == (1, 0, 2)
    assert (root / "etc/edgeft/agent.json").read_text() == '{"new":1}'


@pytest.mark.parametrize("extra, message", [
    ('- {src: /etc/hostname, content: "x", dest: "{{ root }}/both"}',
     "files[2]: give exactly one of src (a controller file) and content (text)"),
    ('- {content: "x", dest: "{{ root }}/octal", mode: 0644}',
     "files[2].mode: 420 must be an octal mode as a quoted string"),
    ('- {src: "{{ root }}/../no-such-file", dest: "{{ root }}/missing"}',
     "files[2].src: cannot read"),
    ('- {content: "x", dest: "relative"}',
     "files[2].dest: 'relative' must be a normalised absolute path"),
])
def test_bad_input_is_refused_naming_the_option_with_nothing_changed(tmp_path, extra, message):
    changed, failed, _runs, out = play(tmp_path, extra=extra)
    assert (changed, failed) == (0, 1) and message in out, out[-4000:]
    assert not (tmp_path / "root").exists()

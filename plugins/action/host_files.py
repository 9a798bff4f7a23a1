# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host_files action (documented in plugins/modules/host_files.py): reads each file's
content on the controller, sends the module the digests, and the content only of the files the
module says differ (plugins/module_utils/host_files.py has the protocol)."""

from __future__ import annotations

import base64
import hashlib

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.plugins.action import ActionBase

from ansible_collections.edgeft.failover.plugins.module_utils import host_files

MODULE = "edgeft.failover.host_files"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False  # the content travels in the module's arguments
    _VALID_ARGS = frozenset(("files", "directories", "links"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self._task.args
        for option in self._VALID_ARGS:
            if not isinstance(args.get(option, []), list):
                raise AnsibleActionFail("%s: expected a list, got %s" % (option, type(args[option]).__name__))
        contents = {}
        files = [self._digest(entry, "files[%d]" % index, contents) for index, entry in enumerate(args.get("files", []))]
        module_args = dict(files=files, directories=args.get("directories", []), links=args.get("links", []))
        try:
            done = self._execute_module(MODULE, module_args=module_args, task_vars=task_vars)
            if not done.get("failed") and done.get("need_content") and not self._task.check_mode:
                needed = set(done["need_content"])
                module_args["files"] = [dict(f, content_base64=base64.b64encode(contents[f["dest"]]).decode("ascii"))
                                        if f["dest"] in needed else f for f in files]
                done = self._execute_module(MODULE, module_args=module_args, task_vars=task_vars)
                if not done.get("failed") and done.get("need_content"):
                    raise AnsibleActionFail("files: %s changed on the host while this task ran: run it again"
                                            % ", ".join(done["need_content"]))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        done.pop("invocation", None)  # it would echo every file's content
        for entry in done.get("diff") or []:
            if entry.get("after") is None:
                entry["after"] = host_files.describe(contents.get(entry.get("after_header")))
        result.update(done)
        return result

    def _digest(self, entry, where, contents):
        """The module's entry for a file: its dest and mode, and the sha256 of its content, which
        `contents` keeps by dest."""
        if not isinstance(entry, dict):
            raise AnsibleActionFail("%s: expected a dict with dest, src or content, and mode" % where)
        unknown = set(entry) - {"dest", "src", "content", "mode"}
        if unknown:
            raise AnsibleActionFail("%s: unknown option(s) %s; a file takes dest, src or content, and mode"
                                    % (where, ", ".join(sorted(unknown))))
        if ("src" in entry) == ("content" in entry):
            raise AnsibleActionFail("%s: give exactly one of src (a controller file) and content (text)" % where)
        if not isinstance(entry.get("dest"), str):
            raise AnsibleActionFail("%s.dest: the path on the host is required, as a string" % where)
        if "src" in entry:
            data = self._read(entry["src"], where)
        elif isinstance(entry["content"], str):
            data = to_bytes(entry["content"], errors="surrogate_or_strict")
        else:
            raise AnsibleActionFail("%s.content: expected text, got %s" % (where, type(entry["content"]).__name__))
        contents[entry["dest"]] = data
        return dict(dest=entry["dest"], mode=entry.get("mode", "0644"), sha256=hashlib.sha256(data).hexdigest())

    def _read(self, src, where):
        if not isinstance(src, str) or not src:
            raise AnsibleActionFail("%s.src: a controller file is required, as a string" % where)
        try:
            real = self._loader.get_real_file(self._find_needle("files", src), decrypt=True)
            try:
                with open(to_bytes(real, errors="surrogate_or_strict"), "rb") as handle:
                    return handle.read()
            finally:
                self._loader.cleanup_tmp_file(real)  # a decrypted copy of a vaulted file
        except (AnsibleError, OSError) as exc:
            raise AnsibleActionFail("%s.src: cannot read %s on the controller: %s" % (where, src, to_native(exc))) from None

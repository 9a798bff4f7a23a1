"""One error base for every core, and one way a module ends (module_result.finish)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from ansible_collections.edgeft.failover.plugins import module_utils
from ansible_collections.edgeft.failover.plugins.module_utils import module_result
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.spec import OptionError


def _error_classes():
    for info in pkgutil.walk_packages(module_utils.__path__, module_utils.__name__ + "."):
        module = importlib.import_module(info.name)
        for _name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == module.__name__:
                yield cls


def test_every_error_of_the_cores_is_an_edgeft_error():
    classes = list(_error_classes())
    assert len(classes) > 20
    assert [c.__module__ + "." + c.__name__ for c in classes if not issubclass(c, EdgeftError)] == []


class Ended(Exception):
    pass


class Module:
    """Stands in for AnsibleModule: records how finish() ends it (the real modules run through
    it in the kernel tests)."""

    def __init__(self, diff):
        self._diff = diff
        self.warnings = []

    def warn(self, text):
        self.warnings.append(text)

    def exit_json(self, **result):
        raise Ended(dict(result, failed=False))

    def fail_json(self, msg, **result):
        raise Ended(dict(result, msg=msg, failed=True))


def end(module, run, **kwargs):
    with pytest.raises(Ended) as ended:
        module_result.finish(module, run, **kwargs)
    return ended.value.args[0]


def test_a_result_keeps_its_diff_only_in_diff_mode_and_passes_warnings_on():
    def run():
        return {"changed": True, "diff": {"before": "a", "after": "b"}}, ["careful"]

    quiet = Module(diff=False)
    assert end(quiet, run) == {"changed": True, "failed": False}
    assert quiet.warnings == ["careful"]
    assert end(Module(diff=True), run, diff_headers=("host", "declared"))["diff"] == {
        "before": "a", "after": "b", "before_header": "host", "after_header": "declared"}


@pytest.mark.parametrize("error", [OptionError("planes[0].name: must be a string"),
                                   EdgeftError("rolled back", result={"changed": False, "attached": []}),
                                   OSError(13, "Permission denied")])
def test_errors_fail_the_task_with_their_message_and_partial_result(error):
    def run():
        raise error

    result = end(Module(diff=True), run)
    assert result["failed"] and result["msg"] == str(error)
    assert {k: v for k, v in result.items() if k not in ("msg", "failed")} == getattr(error, "result", {})


def test_other_exceptions_are_not_swallowed():
    def run():
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        module_result.finish(Module(diff=False), run)

"""The Prometheus alert rules and the Grafana dashboard in monitoring/.

promtool (Prometheus's own checker, taken out of the distribution's package by
scripts/bootstrap.sh) checks the rules and runs their unit tests (tests/data/monitoring); every
metric the rules and the dashboard query is one the agent exports.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess

import pytest
import yaml
from metrics_scale import synthetic_agent

from ansible_collections.edgeft.failover.plugins.module_utils.agent import exposition, metrics
from repo import REPO

RULES = REPO / "monitoring" / "prometheus" / "edgeft-alerts.yml"
RULE_TESTS = REPO / "tests" / "data" / "monitoring" / "edgeft-alerts.test.yml"
DASHBOARD = REPO / "monitoring" / "grafana" / "edgeft-fabric.json"
METRIC = re.compile(r"\b(edgeft_[a-z0-9_]+|up)\b(?=\s*[{\[)=<>]|\s*$|\s+(?:==|unless|or|/))")


def promtool():
    found = os.environ.get("EDGEFT_PROMTOOL") or shutil.which("promtool") or next(
        iter(sorted(glob.glob("/var/cache/edgeft/promtool/*/promtool"))), None)
    if not found:
        pytest.fail("promtool not found: run scripts/bootstrap.sh with EDGEFT_WITH_PROMTOOL=1 (scripts/test.sh does)")
    return found


def exported():
    """Every metric family name the agent exports (the synthetic agent has failed-over peers, so
    the per-peer families are there too), and Prometheus's own `up`."""
    text = metrics.metrics(synthetic_agent(20, failed=2))
    return {name for name, _labels in exposition.parse(text)} | {"up"}


def queried_metrics(expr):
    return set(METRIC.findall(expr))


def test_promtool_accepts_the_rules_and_their_unit_tests_pass():
    tool = promtool()
    check = subprocess.run([tool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    unit = subprocess.run([tool, "test", "rules", str(RULE_TESTS)], capture_output=True, text=True, check=False)
    assert unit.returncode == 0 and "SUCCESS" in unit.stdout, unit.stdout + unit.stderr


def test_every_alert_is_unit_tested():
    rules = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    tested = {t["alertname"] for case in yaml.safe_load(RULE_TESTS.read_text())["tests"] for t in case["alert_rule_test"]}
    assert rules == tested


def test_rules_and_dashboard_query_only_what_the_agent_exports():
    names = exported()
    exprs = [r["expr"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    dashboard = json.loads(DASHBOARD.read_text())
    exprs += [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    for expr in exprs:
        used = queried_metrics(expr)
        assert used, expr
        assert used <= names, (expr, used - names)


def test_the_dashboard_is_importable_grafana_json():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "edgeft-fabric" and dashboard["panels"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]
        for target in panel["targets"]:
            for var in re.findall(r"\$(\w+)", target["expr"]):
                assert var in variables or var.startswith("__"), (panel["title"], var)

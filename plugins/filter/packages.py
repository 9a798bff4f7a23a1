# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The target_packages, target_packages_query, target_packages_missing and target_packages_failure
filters (each documented in its own .yml beside this file)."""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.host import packages


def target_packages(facts, loader="object", headers_present=False):
    """What the role installs on a target for this loader, from the target's facts (ansible_facts)."""
    facts = facts if isinstance(facts, dict) else {}
    return packages.target_packages(facts.get("os_family", ""), facts.get("distribution_major_version"), loader,
                                    facts.get("kernel", ""), distribution=facts.get("distribution", ""),
                                    headers_present=bool(headers_present))


def target_packages_failure(plan, error=""):
    """The message for a failed installation of target_packages' packages."""
    plan = plan if isinstance(plan, dict) else {}
    return packages.install_failed(plan.get("packages", []), plan.get("manager", ""), error)


def target_packages_query(plan):
    """The command (argv) listing which of target_packages' packages are installed on the target."""
    return packages.installed_query(plan if isinstance(plan, dict) else {})


def target_packages_missing(plan, query_output=""):
    """target_packages' packages that target_packages_query's output does not show installed."""
    return packages.missing(plan if isinstance(plan, dict) else {}, query_output)


class FilterModule:
    def filters(self):
        return {"target_packages": target_packages, "target_packages_query": target_packages_query,
                "target_packages_missing": target_packages_missing, "target_packages_failure": target_packages_failure}

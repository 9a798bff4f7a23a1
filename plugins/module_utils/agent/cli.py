# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Command line: `edgeft-agent [run|check|status] --config FILE [overrides]`.

`edgeft-agent restore-datapath` (the boot unit's, before the agent starts) is
not the agent's: bin/edgeft-agent hands it to restore.py, so the agent never
imports the modules' cores.

Exit codes: 0 ok; 1 a runtime failure; 2 a configuration the agent refuses
(one line naming the option) or bad usage.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from ansible_collections.edgeft.failover.plugins.module_utils import constants
from ansible_collections.edgeft.failover.plugins.module_utils.agent import config as config_mod
from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import ConfigError

COMMANDS = ("run", "check", "status")
PROG = "edgeft-agent"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="edgeft failover agent: probes, link events, metrics")
    p.add_argument("--version", action="version", version="%s %s" % (PROG, constants.VERSION))
    p.add_argument("command", choices=COMMANDS, help="run the agent (default), check the configuration, or show status")
    p.add_argument("--config", "-c", help="JSON configuration file (docs/agent.md)")
    p.add_argument("--pin-root", dest="pin_root", help="bpffs directory of this host's pinned maps")
    p.add_argument("--state-dir", dest="state_dir", help="edgeft state directory (peer names from the peer table record)")
    p.add_argument("--interval-ms", dest="interval_ms", type=int, help="probe interval (default 10)")
    p.add_argument("--idle-interval-ms", dest="idle_interval_ms", type=int,
                   help="probe interval to peers without recent traffic (default 1000)")
    p.add_argument("--active-window-ms", dest="active_window_ms", type=int,
                   help="a peer with traffic within this window is probed every interval (default 2000)")
    p.add_argument("--multiplier", type=int, help="missed probes before a path is down (default 3)")
    p.add_argument("--hold-down-ms", dest="hold_down_ms", type=int, help="stable time before failback (default 1000)")
    p.add_argument("--metrics-listen", dest="metrics_listen", help="ADDRESS:PORT of /metrics and /status (default 127.0.0.1:9531)")
    p.add_argument("--no-backup-routes", dest="backup_routes", action="store_const", const=False,
                   help="do not install backup routes (docs/agent.md)")
    p.add_argument("--log-level", dest="log_level", choices=config_mod.LOG_LEVELS)
    p.add_argument("--json", action="store_true", help="status: print the JSON instead of tables")
    return p


def _logger(level: str) -> logging.Logger:
    log = logging.getLogger(PROG)
    handler = logging.StreamHandler(sys.stderr)
    # journald stamps every line itself; elsewhere (the lab) stamp them here.
    fmt = "%(levelname)s %(message)s" if os.environ.get("JOURNAL_STREAM") else "%(asctime)s.%(msecs)03d %(levelname)s %(message)s"
    handler.setFormatter(logging.Formatter(fmt, "%H:%M:%S"))
    log.handlers[:] = [handler]
    log.setLevel(level.upper())
    log.propagate = False
    return log


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version"):
        argv.insert(0, "run")
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:
        return 0 if e.code in (0, None) else 2  # --help and --version exit 0, usage errors 2
    overrides = {k: getattr(args, k) for k in ("pin_root", "state_dir", "interval_ms", "idle_interval_ms",
                                               "active_window_ms", "multiplier", "hold_down_ms", "metrics_listen", "backup_routes", "log_level")}
    try:
        cfg = config_mod.load(args.config, overrides)
        if args.command == "status":
            from ansible_collections.edgeft.failover.plugins.module_utils.agent import statuscmd

            return statuscmd.run(cfg, args.json, sys.stdout)
        return _run(cfg, check_only=args.command == "check")
    except ConfigError as e:
        sys.stderr.write("%s: error: %s\n" % (PROG, e))
        return 2
    except KeyboardInterrupt:
        return 130


def _run(cfg, check_only: bool) -> int:
    from ansible_collections.edgeft.failover.plugins.module_utils.agent import checks

    log = _logger(cfg.log_level)
    checks.interface_indexes(cfg)
    maps = checks.open_maps(cfg)
    try:
        planes = checks.resolve_planes(cfg, log)
        checks.check_plane_slots(planes, maps)
        checks.check_tcp(cfg)
        if check_only:
            sys.stdout.write("%s: configuration ok: %d plane(s), %s\n" % (PROG, len(planes), cfg.summary()))
            return 0
        from ansible_collections.edgeft.failover.plugins.module_utils.agent.agent import Agent

        agent = Agent(cfg, maps, planes, log)
        try:
            agent.start()
        except OSError as e:
            if cfg.metrics_listen and agent.endpoint is None and getattr(e, "errno", None):
                raise ConfigError("metrics_listen: cannot listen on %s:%d: %s" % (cfg.metrics_listen + (e.strerror,))) from None
            raise
        agent.run()
        return 0
    except OSError as e:
        log.error("stopped: %s", e)
        return 1
    finally:
        maps.close()

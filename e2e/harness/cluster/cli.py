"""`python -m harness.cluster up|down|status|env|...` (PYTHONPATH=e2e)."""

from __future__ import annotations

import argparse
import sys

import yaml

import harness.cluster  # its docstring is the help text
from harness.cluster import keda, lifecycle, prometheus
from harness.cluster.state import ClusterError, ClusterInfo, info, log


def print_env(ci: ClusterInfo) -> None:
    print(f"export KUBECONFIG={ci.kubeconfig}")
    print(f"# Prometheus: {ci.prometheus_url}")
    print(f"# kubectl:    {ci.bin_dir / 'kubectl'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.cluster", description=harness.cluster.__doc__
    )
    parser.add_argument(
        "command",
        choices=[
            "up",
            "down",
            "status",
            "env",
            "start-prometheus",
            "stop-prometheus",
            "prometheus-config",
            "keda-up",
            "keda-down",
        ],
    )
    parser.add_argument(
        "--force", action="store_true", help="down: even while pytest sessions use it"
    )
    parser.add_argument("--keda", action="store_true", help="up: also install KEDA (see `keda-up`)")
    parser.add_argument(
        "--kubernetes-sd",
        metavar="KUBECONFIG",
        help="prometheus-config: use kubernetes_sd_configs with this kubeconfig (kind path)",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            lifecycle.check_root()
            with lifecycle.locked():
                ci = lifecycle.up()
            if args.keda:
                keda.up()
            print_env(ci)
        elif args.command == "down":
            lifecycle.check_root()
            with lifecycle.locked():
                users = lifecycle.other_users()
                if users and not args.force:
                    log(f"pytest sessions {users} are using the cluster; not stopping it "
                         "(wait for them, or `down --force`)")  # fmt: skip
                    return 1
                lifecycle.down()
            rest = lifecycle.leftovers()
            if rest:
                log(f"left behind: {rest}")
                return 1
        elif args.command == "status":
            if not lifecycle.running():
                print("not running")
                return 1
            print_env(info())
        elif args.command == "env":
            print_env(info())
        elif args.command == "keda-up":
            if not lifecycle.running():
                log(
                    "the cluster is not running: `make cluster-up` first "
                    "(or `make cluster-up KEDA=1`)"
                )
                return 1
            keda.up()
        elif args.command == "keda-down":
            keda.down()
        elif args.command == "start-prometheus":
            prometheus.start_prometheus()
        elif args.command == "stop-prometheus":
            prometheus.stop_prometheus()
        elif args.command == "prometheus-config":
            cfg = prometheus.prometheus_config(kubernetes_sd_kubeconfig=args.kubernetes_sd)
            print(yaml.safe_dump(cfg, sort_keys=False), end="")
    except ClusterError as err:
        log(f"error: {err}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Command line: `modelscale <command>`. Each command lives with the code it drives;
this module only dispatches, importing lazily so `modelscale crd` needs no cluster libs."""

from __future__ import annotations

import importlib
import importlib.metadata
import sys

# command -> (module, function taking argv and returning an exit code, help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "crd": ("modelscale.api.crd", "main", "print the ModelDeployment CRD YAML"),
    "run": ("modelscale.commands.run", "main", "run the operator"),
    "recommend": (
        "modelscale.commands.recommend",
        "main",
        "print what the autoscaler would do now for NAMESPACE/NAME, and why",
    ),
    "simulate": ("modelscale.simulate.cli", "main", "replay a trace through the policies"),
    "render": ("modelscale.render", "main", "print the objects the operator would apply (-f FILE)"),
}


def usage() -> str:
    lines = ["usage: modelscale [--version] <command> [options]", "", "commands:"]
    lines += [f"  {name:<10} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in {"-h", "--help"}:
        print(usage())
        return 0 if args else 2
    if args[0] in {"-V", "--version"}:
        print(f"modelscale {importlib.metadata.version('modelscale')}")
        return 0
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        print(f"modelscale: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module_name, func_name, _ = COMMANDS[command]
    func = getattr(importlib.import_module(module_name), func_name)
    result: int = func(rest)
    return result

"""shlo-env: graph-rewrite search over StableHLO (also `python -m shlo_env`).

Each subcommand lives in its own module, which defines `add_arguments(parser)` and `run(args)`;
this file only wires them up (modules are imported lazily, so `--help` stays fast).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading

SUBCOMMANDS = {
    "optimize": ("shlo_env.api.optimize_file", "optimize a StableHLO file (.mlir, .mlirbc, compressed; - for "
                                               "stdin/stdout) and write the optimized module"),
    "patterns": ("shlo_env.patterns.docs", "list the rewrite patterns: name, family, numerics tier, one line each"),
    "cache": ("shlo_env.api.cache", "list, clear, export or import the persistent cache of searches"),
    "bench": ("shlo_env.bench.cli", "sweep datasets of programs, store every measurement, print Table 2 "
                                    "against jax.jit"),
    "profile": ("shlo_env.measure.kernel_profile", "time per XLA kernel, mapped back to the StableHLO ops and patterns"),
    "show": ("shlo_env.research.show", "render a program and its alternatives as Graphviz DOT/SVG"),
    "noise": ("shlo_env.bench.noise_profile", "measure this machine's noise profile (faster/slower thresholds)"),
    "dataset": ("shlo_env.learn.dataset_cli", "build and export the measurement dataset for learned cost "
                                               "models"),
    "learn": ("shlo_env.learn.learn_cli", "train and evaluate the learned cost model (ranking within a program)"),
}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that the same cleanup runs (the worker is killed, nothing
    is left half-written)."""


def _raise_terminated(signum, frame):
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    prog = f"shlo-env {argv[0]}" if argv else "shlo-env"
    # Ctrl-C and SIGTERM become exceptions in the main thread, so the search's cleanup runs
    # (a SIGINT inherited as ignored, as a non-interactive shell's `&` leaves it, is restored).
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        handlers = {signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
                    signal.SIGTERM: signal.signal(signal.SIGTERM, _raise_terminated)}
    try:
        return _main(argv)
    except KeyboardInterrupt as e:
        terminated = isinstance(e, Terminated)
        print(f"{prog}: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return 128 + int(signal.SIGTERM if terminated else signal.SIGINT)
    finally:
        for signum, handler in handlers.items():  # main() may be called from Python: leave them as found
            if handler is not None:
                signal.signal(signum, handler)


def version_text() -> str:
    """`shlo-env X (jax Y, jaxlib Z)`, read from the installed metadata: jax is not imported."""
    from importlib import metadata

    from shlo_env._version import __version__

    def installed(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    return f"shlo-env {__version__} (jax {installed('jax')}, jaxlib {installed('jaxlib')})"


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="shlo-env", description=__doc__.splitlines()[0],
        epilog="Python: shlo_env.jit(fn) or shlo_env.optimize(fn, *args), like jax.jit. "
               "Logs: SHLO_ENV_LOGS=search,cache,verify,worker. Docs: docs/index.md.")
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module_name)
        if argv[:1] == [name]:  # only the chosen command's module is imported
            importlib.import_module(module_name).add_arguments(p)
    args = parser.parse_args(argv)
    if not getattr(args, "_module", None):
        parser.print_help()
        return 2
    return int(importlib.import_module(args._module).run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

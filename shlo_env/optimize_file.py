"""`shlo-env optimize IN -o OUT`: a StableHLO file in, the optimized module out.

    shlo-env optimize model.mlir -o model.opt.mlirbc --budget 60 --report
    cat model.mlir.xz | shlo-env optimize - -o - > model.opt.mlir

IN is `.mlir` text, `.mlirbc` bytecode (or a StableHLO portable artifact), optionally compressed
with xz, gzip, bzip2 or zstd (recognized by content, so stdin works too); `-` reads stdin. OUT's
extension picks the format (`.mlirbc` bytecode, else text; a trailing `.xz`/`.gz`/`.bz2`
compresses); `-` writes text to stdout. The search is `optimize_program` (every candidate
verified against the input module before it is timed); `--report` writes its JSON record next to
OUT (`OUT.report.json`) or to the path given.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import json
import lzma
import sys
from typing import Callable
from pathlib import Path

from shlo_env.import_ import BYTECODE_MAGIC, Program, ProgramError, parse_module, program_from_module

_COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {".xz": lzma.compress, ".gz": gzip.compress, ".bz2": bz2.compress}


def _zstd_decompress(data: bytes) -> bytes:
    try:
        from compression import zstd  # Python 3.14+

        return zstd.decompress(data)
    except ImportError:
        pass
    try:
        import zstandard
    except ImportError:
        raise ProgramError("the input is zstd-compressed; install the `zstandard` package to read it, "
                           "or decompress it first (zstd -d)") from None
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def decompress(data: bytes) -> bytes:
    """`data` uncompressed (xz, gzip, bzip2 and zstd are recognized by their magic bytes)."""
    try:
        if data.startswith(b"\xfd7zXZ\x00"):
            return lzma.decompress(data)
        if data.startswith(b"\x1f\x8b"):
            return gzip.decompress(data)
        if data.startswith(b"BZh"):
            return bz2.decompress(data)
    except (lzma.LZMAError, OSError, EOFError) as e:
        raise ProgramError(f"corrupt compressed input: {e}") from None
    if data.startswith(b"\x28\xb5\x2f\xfd"):
        return _zstd_decompress(data)
    return data


def read_program(source: str) -> Program:
    """A Program from a file path, or from stdin for `-`."""
    if source == "-":
        data, name, origin = sys.stdin.buffer.read(), "stdin", "<stdin>"
    else:
        path = Path(source)
        if not path.is_file():
            raise ProgramError(f"no such file: {path}")
        data, name, origin = path.read_bytes(), path.name.split(".")[0] or "main", str(path)
    data = decompress(data)
    if not data.strip():
        raise ProgramError(f"{origin} is empty")
    text_or_bytes: str | bytes = data
    if not data.startswith(BYTECODE_MAGIC):
        try:
            text_or_bytes = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ProgramError(f"{origin} is neither MLIR text nor MLIR bytecode") from None
    module = parse_module(text_or_bytes, what=origin)
    return program_from_module(module, name=name, source=origin)


def write_program(program: Program, dest: str) -> None:
    """Bytecode for `.mlirbc` (before an optional compression suffix), text otherwise."""
    if dest == "-":
        sys.stdout.write(program.text())
        sys.stdout.flush()
        return
    path = Path(dest)
    compress = _COMPRESSORS.get(path.suffix)
    inner = path.with_suffix("") if compress else path
    data = program.bytecode() if inner.suffix == ".mlirbc" else program.text().encode()
    path.write_bytes(compress(data) if compress else data)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help="a .mlir/.mlirbc file (optionally .xz/.gz/.bz2/.zst compressed), or - for stdin")
    p.add_argument("-o", "--output", required=True,
                   help="where to write the optimized module: .mlirbc for bytecode, else text "
                        "(a .xz/.gz/.bz2 suffix compresses); - for stdout")
    p.add_argument("--strategy", default="auto", help="a search strategy (default: auto, by decision-space size)")
    p.add_argument("--budget", type=float, default=60.0, help="wall-clock budget in seconds (default 60)")
    p.add_argument("--patterns", default=None,
                   help="comma-separated pattern names (default: every value-preserving pattern)")
    p.add_argument("--passes", action="store_true", help="also let the search disable XLA passes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=None, help="per compile/run limit in the worker (s)")
    p.add_argument("--report", nargs="?", const="", default=None, metavar="PATH",
                   help="write the search's JSON report (default path: OUTPUT.report.json)")
    p.add_argument("--progress", action="store_true", help="a live progress line on stderr")


def run(args: argparse.Namespace) -> int:
    from shlo_env.search import strategies
    from shlo_env.search.runner import SearchOptions, optimize_program

    def fail(message: str) -> int:
        print(f"shlo-env optimize: error: {message}", file=sys.stderr)
        return 2

    if args.strategy != "auto" and args.strategy not in strategies():
        return fail(f"unknown strategy {args.strategy!r}; known: auto, {', '.join(strategies())}")
    if args.budget <= 0:
        return fail("--budget must be positive")
    report_path = args.report
    if report_path == "":
        if args.output == "-":
            return fail("--report needs a path when the output is stdout")
        report_path = args.output + ".report.json"
    patterns = [n.strip() for n in args.patterns.split(",") if n.strip()] if args.patterns else None
    try:
        program = read_program(args.input)
        if patterns is not None:
            from shlo_env.patterns.base import resolve

            resolve(patterns)
    except (ProgramError, KeyError) as e:
        return fail(str(e).strip("'\""))
    res = optimize_program(program, SearchOptions(patterns=patterns, strategy=args.strategy, budget_s=args.budget,
                                                  passes=args.passes, seed=args.seed, timeout_s=args.timeout,
                                                  name=program.name), progress=args.progress)
    if res.status != "ok" or res.program is None:
        return fail(res.error or "the search returned no program")
    try:
        write_program(res.program, args.output)
    except OSError as e:
        return fail(f"cannot write {args.output}: {e}")
    if report_path:
        record = {"input": args.input, "output": args.output, **res.record()}
        Path(report_path).write_text(json.dumps(record, indent=2, default=str))
    print(str(res), file=sys.stderr)
    return 0

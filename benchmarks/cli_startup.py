"""What one ``rill`` command costs in CPU: user + system time of the child process.

Measures ``python -c pass`` (the interpreter's own floor), ``rill --version``, ``rill --help``
and ``rill message send`` (against a server this script starts on loopback, in a temporary
data directory, and stops again), each ``--runs`` times interleaved, and prints the median CPU
seconds per call and its ratio to the floor measured in the same run. CPU time, not wall time:
on a loaded machine wall time measures the neighbours. Run it with the interpreter rill is
installed in, from the tree to measure (``PYTHONPATH=src``), e.g. before and after a change::

    PYTHONPATH=src .venv/bin/python benchmarks/cli_startup.py --runs 15

The children run with byte code cached (``PYTHONDONTWRITEBYTECODE`` dropped, a temporary
``PYTHONPYCACHEPREFIX``, one uncounted warming run), as an installed rill runs: with it set,
every call would compile the source tree first.

Measured on the shared 2-core VM (median of 9, Python 3.11, this script as it is now; "before"
is the tree before the fast path of ``rill message send``, run the same way from a ``git
archive`` of it; the figures of the lazy imports before that: --version 0.43 -> 0.18 s, send
0.90 -> 0.49 s, measured without cached byte code):

    command             before    after    (python -c pass: 0.02 s)
    rill --version      0.16 s    0.15 s   (typer and click alone: ~0.12 s)
    rill --help         0.53 s    0.54 s   (every command's help: typer's rich help)
    rill message send   0.38 s    0.15 s   (fast path: no typer, no asyncio; login + SEND codecs)
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

# the installed ``rill`` script beside the interpreter (what a user runs), else the module
_SCRIPT = Path(sys.executable).parent / "rill"
RILL = [sys.executable, str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "rill.cli.main"]


def cpu_seconds(command: list[str], env: dict[str, str]) -> float:
    """user + sys CPU seconds of one run of ``command`` (which must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@contextmanager
def server(env: dict[str, str]) -> Iterator[str]:
    """A rill server on loopback (TCP only); its address."""
    with tempfile.TemporaryDirectory(prefix="rill-cli-startup-") as data_dir:
        process = subprocess.Popen(
            [*RILL, "serve", "--data-dir", data_dir, "--tcp-address", "127.0.0.1:0"],
            env={**env, "RILL_QUIC_ENABLED": "false", "RILL_HTTP_ENABLED": "false"},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert process.stdout is not None
            for line in process.stdout:
                if line.startswith("rill listening on tcp "):
                    address = line.split()[-1]
                    break
            else:
                raise SystemExit(f"the server did not start (exit {process.wait()})")
            yield address
        finally:
            process.terminate()
            process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=11, help="runs of each command (median)")
    args = parser.parse_args()
    # compiled once, as an installed rill is: PYTHONDONTWRITEBYTECODE would make every call
    # compile the source tree again (a cost no user pays); the first, warming run is not counted
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="rill-cli-startup-pyc-")
    with server(env) as address:
        logged_in = {**env, "RILL_ADDRESS": address, "RILL_USERNAME": "iggy",
                     "RILL_PASSWORD": "iggy", "RILL_HOME": tempfile.mkdtemp(prefix="rill-home-")}
        subprocess.run([*RILL, "-q", "stream", "create", "bench"], env=logged_in, check=True)
        subprocess.run([*RILL, "-q", "topic", "create", "bench", "t"], env=logged_in, check=True)
        commands = {
            "python -c pass": ([sys.executable, "-c", "pass"], env),
            "rill --version": ([*RILL, "--version"], env),
            "rill --help": ([*RILL, "--help"], env),
            "rill message send": ([*RILL, "-q", "message", "send", "bench", "t", "hello"],
                                  logged_in),
        }
        for command, command_env in commands.values():
            cpu_seconds(command, command_env)  # writes the byte code
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):  # interleaved: a slow moment touches every command alike
            for name, (command, command_env) in commands.items():
                samples[name].append(cpu_seconds(command, command_env))
    floor = statistics.median(samples["python -c pass"])
    print(f"CPU seconds per call (user+sys of the child, median of {args.runs}; "
          f"Python {sys.version.split()[0]})")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"  {name:<20} {median:6.3f} s   {median / floor:5.1f}x python -c pass")


if __name__ == "__main__":
    main()

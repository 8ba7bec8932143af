#!/usr/bin/env python3
"""Runs a cargo selection's tests with several test binaries at once, where `cargo test` runs
them one after another: `scripts/test-binaries.py LOG CARGO_TEST_ARGS...`.

Most of our test binaries spend their time waiting (on mock servers, timers, child processes),
so one at a time left a core idle for minutes. This builds what `cargo test ARGS` would build
(`--no-run`), then runs each test binary as cargo runs it (in its package's folder, with the
variables cargo sets, libtest's own threads and arguments), AGENTAO_TEST_JOBS (default 2) at a
time, the slowest first by the times the last run kept in target/test-binary-times.json; the
doctests run as one more job (`cargo test --doc ARGS`). LOG receives each binary's whole output,
in cargo's order (unit tests, then integration tests by name, then doctests), so a failure reads
as it does under cargo. Exit status 0 when every binary passed; 1 when one failed, was killed by
a signal or could not start; the status of `cargo` when the build failed."""

import concurrent.futures
import json
import os
import subprocess
import sys
import time
from typing import NamedTuple

TIMES = "target/test-binary-times.json"
DOCTESTS = "doctests"


class Binary(NamedTuple):
    key: str  # "<package folder>/<kind>/<target>", the same in every clone of the workspace
    executable: str
    folder: str  # the package's folder: cargo runs its tests there
    package: str
    source: str  # the target's source file, as cargo's "Running" line names it


class Outcome(NamedTuple):
    status: int
    output: str
    seconds: float


def package_name(package_id):
    """The name in a package id: `path+file:///w/acp#agentao-acp@0.1.0`, or the folder's name
    when cargo leaves it out (`path+file:///w/mock-openai#0.1.0`)."""
    url, _, fragment = package_id.partition("#")
    return fragment.split("@")[0] if "@" in fragment else os.path.basename(url.rstrip("/"))


def build(args):
    """The test binaries `cargo test ARGS` runs, after building them."""
    proc = subprocess.run(
        ["cargo", "test", "--no-run", "--message-format=json-render-diagnostics", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    if proc.returncode != 0:
        sys.exit(proc.returncode)
    out = []
    for line in proc.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg["profile"]["test"]:
            continue
        target, folder = msg["target"], os.path.dirname(msg["manifest_path"])
        # A library's crate types (ours: cdylib, staticlib, rlib) have one unit-test binary.
        kind = "lib" if any(k.endswith("lib") for k in target["kind"]) else target["kind"][0]
        out.append(Binary(
            key=f"{os.path.relpath(folder)}/{kind}/{target['name']}",
            executable=msg["executable"],
            folder=folder,
            package=package_name(msg["package_id"]),
            source=os.path.relpath(target["src_path"], folder),
        ))
    # cargo's order: each package's unit tests first, then its integration tests by name.
    out.sort(key=lambda b: (b.folder, "/test/" in b.key, b.key))
    return out


def run_binary(b, libtest_args):
    env = dict(os.environ)
    # What cargo sets for a test it runs; no test reads them at run time today, but a new one
    # may, and it should see what `cargo test` gives it.
    env["CARGO_MANIFEST_DIR"] = b.folder
    env["CARGO_MANIFEST_PATH"] = os.path.join(b.folder, "Cargo.toml")
    env["CARGO_PKG_NAME"] = b.package
    deps = os.path.dirname(b.executable)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (deps, os.path.dirname(deps), os.environ.get("LD_LIBRARY_PATH")) if p
    )
    return run(b.key, [b.executable, *libtest_args], b.folder, env)


def run(key, argv, folder, env):
    """Runs one job to its end: (key, Outcome)."""
    started = time.monotonic()
    try:
        proc = subprocess.run(
            argv, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        output, status = proc.stdout.decode("utf-8", "replace"), proc.returncode
    except OSError as e:
        output, status = f"could not start {argv[0]}: {e}\n", 1
    return key, Outcome(status, output, time.monotonic() - started)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    log_path, args = sys.argv[1], sys.argv[2:]
    # ARGS may end with `-- LIBTEST_ARGS` as for cargo test.
    cargo_args, libtest_args = args, []
    if "--" in args:
        i = args.index("--")
        cargo_args, libtest_args = args[:i], args[i + 1 :]
    doc = ["cargo", "test", "--doc", *cargo_args, "--", *libtest_args]
    # cargo passes its --quiet on to libtest.
    if "--quiet" in cargo_args or "-q" in cargo_args:
        libtest_args = ["--quiet", *libtest_args]
    binaries = build(cargo_args)
    try:
        with open(TIMES) as f:
            last = json.load(f)
    except (OSError, ValueError):
        last = {}
    jobs = max(1, int(os.environ.get("AGENTAO_TEST_JOBS", "2")))
    # The slowest first, so the last to finish is a short one; unknown ones (new, or a cold
    # target/) before the known ones, since they may be long.
    unknown = float("inf")
    queue = [(last.get(b.key, unknown), lambda b=b: run_binary(b, libtest_args)) for b in binaries]
    queue.append((last.get(DOCTESTS, unknown), lambda: run(DOCTESTS, doc, os.getcwd(), os.environ)))
    queue.sort(key=lambda job: -job[0])
    results = {}
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for f in concurrent.futures.as_completed([pool.submit(job) for _, job in queue]):
            key, r = f.result()
            results[key] = r
            verdict = "ok" if r.status == 0 else f"FAILED (status {r.status})"
            print(f"  {key}: {verdict} in {r.seconds:.1f}s", file=sys.stderr, flush=True)
    failed = []
    with open(log_path, "w") as log:
        for key, source, exe in [(b.key, b.source, b.executable) for b in binaries] + [
            (DOCTESTS, "doctests", "cargo test --doc")
        ]:
            r = results[key]
            log.write(f"     Running {key} {source} ({exe})\n{r.output}")
            if r.status != 0:
                failed.append(key)
                # A binary killed by a signal (a crash, the OOM killer) prints no "FAILED".
                log.write(f"error: test binary {key} exited with status {r.status}\n")
    times = {key: round(r.seconds, 1) for key, r in results.items()}
    try:
        with open(TIMES, "w") as f:
            json.dump(times, f, indent=1, sort_keys=True)
    except OSError:
        pass
    print(
        f"test binaries: {len(results)}, {jobs} at a time: {time.monotonic() - started:.0f}s"
        f" (one at a time: {sum(times.values()):.0f}s)",
        file=sys.stderr,
    )
    if failed:
        print(f"failed: {' '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

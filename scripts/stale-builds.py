#!/usr/bin/env python3
"""Finds and deletes the build outputs a run of scripts/test.sh did not use (CI only).

Cargo never deletes what it stops using: after a change of Cargo.lock, of features or of the
toolchain, the old copies of every changed crate stay beside the new ones, so a build tree
kept between CI runs doubles at each such change, passes its budget and is then deleted whole
(scripts/test.sh): the next run builds everything cold, ~20 minutes more on 2 cores. This
keeps the tree to what the run uses instead.

    scripts/stale-builds.py mark    at a run's start: sets the access time of every cargo
                                    fingerprint file in the build trees to 1970
    scripts/stale-builds.py prune   after every step of that run passed: deletes each build
                                    unit none of whose fingerprint files was read since
    scripts/stale-builds.py prune --workspace
                                    also the workspace's own units (its crates, their tests,
                                    examples and build scripts): a CI checkout is a fresh
                                    clone, whose sources are newer than any kept output, so
                                    cargo rebuilds them every run and keeping them only costs
                                    space (~3.4 GiB of a full run's 7 GiB in target/)

Cargo reads a unit's fingerprint whenever a build needs the unit, fresh or not, and the
kernel's default `relatime` updates an access time older than the file's change time on the
next read. Where access times are not kept (`noatime`), `mark` says so and `prune` deletes
nothing. A unit's outputs carry its hash in their names (`libserde-<hash>.rlib`,
`<test>-<hash>`, `build/<pkg>-<hash>/`), which is how they are found.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TREES = ["target", "build/tsan-target", "build/miri-target", "build/fuzz-target"]
MARK = "build/stale-builds.mark"
OLD = 86400 * 10**9  # 1970-01-02: before any change time, so the next read updates it
HASHED = re.compile(r"-([0-9a-f]{16})(?:\.|$)")


def profiles():
    """Every profile folder (one that holds `.fingerprint`) in the build trees."""
    for tree in TREES:
        for folder, subdirs, _ in os.walk(tree):
            if ".fingerprint" in subdirs:
                yield folder
                subdirs.clear()
            elif folder.count(os.sep) - tree.count(os.sep) >= 3:
                subdirs.clear()


def unit_hash(unit):
    """The hash a unit's folder name ends with (`serde-<hash>`), which its outputs carry too."""
    return unit.rsplit("-", 1)[-1]


def fingerprint_files(profile):
    root = os.path.join(profile, ".fingerprint")
    for unit in os.listdir(root):
        folder = os.path.join(root, unit)
        if os.path.isdir(folder):
            yield unit, [os.path.join(folder, f) for f in os.listdir(folder)]


def access_times_kept():
    with tempfile.NamedTemporaryFile(dir="build") as probe:
        probe.write(b"x")
        probe.flush()
        os.utime(probe.name, ns=(OLD, os.stat(probe.name).st_mtime_ns))
        with open(probe.name, "rb") as again:
            again.read()
        return os.stat(probe.name).st_atime_ns > OLD


def mark():
    if os.path.exists(MARK):
        os.remove(MARK)
    if not access_times_kept():
        print("stale builds: access times are not kept on this file system; nothing will be pruned")
        return
    started = time.time_ns()
    count = 0
    for profile in profiles():
        for _, files in fingerprint_files(profile):
            for f in files:
                os.utime(f, ns=(OLD, os.stat(f).st_mtime_ns))
                count += 1
    with open(MARK, "w") as out:
        out.write(f"{started}\n")
    print(f"stale builds: {count} fingerprint files marked unread")


def size(path):
    if os.path.isdir(path) and not os.path.islink(path):
        return sum(os.lstat(os.path.join(d, f)).st_size for d, _, fs in os.walk(path) for f in fs)
    return os.lstat(path).st_size


def workspace_packages():
    """The names of the workspace's packages (`cargo metadata`, offline)."""
    out = subprocess.run(["cargo", "metadata", "--no-deps", "--offline", "--format-version", "1"],
                         capture_output=True, check=True, text=True).stdout
    return {p["name"] for p in json.loads(out)["packages"]}


def prune(rebuilt_each_run=frozenset()):
    """Deletes the units the run did not read, and those of the packages in rebuilt_each_run."""
    try:
        with open(MARK) as f:
            started = int(f.read())
    except (FileNotFoundError, ValueError):
        print("stale builds: no mark from this run's start; nothing pruned")
        return
    os.remove(MARK)
    for profile in profiles():
        used, stale, read_any = set(), {}, False
        for unit, files in fingerprint_files(profile):
            read = any(os.stat(f).st_atime_ns >= started for f in files)
            read_any = read_any or read
            if read and unit.rsplit("-", 1)[0] not in rebuilt_each_run:
                used.add(unit)
            else:
                stale[unit] = unit_hash(unit)
        if not read_any:
            # A profile this run never built (its step was skipped): keep it as it is.
            continue
        doomed = set(stale.values()) - {unit_hash(u) for u in used}
        victims = [os.path.join(profile, ".fingerprint", u) for u in stale]
        victims += [os.path.join(profile, "build", u) for u in stale]
        for sub in ("deps", "examples"):
            folder = os.path.join(profile, sub)
            if os.path.isdir(folder):
                for name in os.listdir(folder):
                    m = HASHED.search(name)
                    if m and m.group(1) in doomed:
                        victims.append(os.path.join(folder, name))
        freed = 0
        for victim in victims:
            if not os.path.lexists(victim):
                continue
            freed += size(victim)
            if os.path.isdir(victim) and not os.path.islink(victim):
                shutil.rmtree(victim)
            else:
                os.remove(victim)
        print(f"stale builds: {profile}: {len(used)} units kept, {len(stale)} deleted "
              f"({freed / 2**30:.1f} GiB)")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["mark"]:
        mark()
    elif args == ["prune"]:
        prune()
    elif args == ["prune", "--workspace"]:
        prune(workspace_packages())
    else:
        sys.exit(__doc__)

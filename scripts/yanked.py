#!/usr/bin/env python3
"""Fails when Cargo.lock pins a crate version its registry has yanked.

A yanked version is one its authors withdrew (a soundness bug, a broken
release); `cargo` keeps building a lock file that already names one, so
the check reads the registry's sparse index for every locked package.
Run by `.ci/run`; needs only the standard library and index.crates.io.

Usage: scripts/yanked.py [Cargo.lock]
"""

import concurrent.futures
import json
import sys
import tomllib
import urllib.error
import urllib.request

INDEX = "https://index.crates.io"
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"
# Sixteen requests in flight at most, each given 30 s.
WORKERS = 16
TIMEOUT_S = 30


def index_path(name: str) -> str:
    """The sparse index's file of a crate (cargo's layout by name length)."""
    name = name.lower()
    if len(name) <= 2:
        return f"{len(name)}/{name}"
    if len(name) == 3:
        return f"3/{name[0]}/{name}"
    return f"{name[:2]}/{name[2:4]}/{name}"


def yanked_versions(name: str) -> set[str]:
    url = f"{INDEX}/{index_path(name)}"
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        lines = response.read().decode("utf-8").splitlines()
    return {entry["vers"] for entry in map(json.loads, filter(None, lines)) if entry.get("yanked")}


def main() -> int:
    lock_path = sys.argv[1] if len(sys.argv) > 1 else "Cargo.lock"
    with open(lock_path, "rb") as f:
        packages = tomllib.load(f).get("package", [])
    locked = [(p["name"], p["version"]) for p in packages if p.get("source") == CRATES_IO]
    others = [p["name"] for p in packages if p.get("source") not in (None, CRATES_IO)]
    if others:
        print(f"{lock_path}: packages from another source, not checked: {', '.join(others)}", file=sys.stderr)
    names = sorted({name for name, _ in locked})
    try:
        with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
            yanked = dict(zip(names, pool.map(yanked_versions, names)))
    except (urllib.error.URLError, TimeoutError) as err:
        print(f"the crates.io index could not be read: {err}", file=sys.stderr)
        return 2
    withdrawn = sorted((name, version) for name, version in locked if version in yanked[name])
    for name, version in withdrawn:
        print(f"{lock_path}: {name} {version} is yanked on crates.io: `cargo update -p {name}@{version}`")
    print(f"{len(locked)} locked crates read from the index, {len(withdrawn)} yanked", file=sys.stderr)
    return 1 if withdrawn else 0


if __name__ == "__main__":
    sys.exit(main())

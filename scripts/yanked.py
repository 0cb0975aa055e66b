#!/usr/bin/env python3
"""Fails when Cargo.lock pins a crate version its registry has yanked.

A yanked version is one its authors withdrew (a soundness bug, a broken
release); `cargo` keeps building a lock file that already names one, so
the check reads the registry's sparse index for every locked package.

The index is read from index.crates.io; where that host cannot be reached
(a CI machine without a resolver), from the copy cargo itself keeps under
$CARGO_HOME/registry/index/*/.cache, which holds every crate cargo resolved
the lock file with. A crate found in neither is named as not checked; the
check then passes only if nothing it did read was yanked, and says so.
Run by `.ci/run`; needs only the standard library.

Usage: scripts/yanked.py [Cargo.lock]
"""

import concurrent.futures
import glob
import json
import os
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


def yanked_of(entries) -> set[str]:
    return {entry["vers"] for entry in entries if entry.get("yanked")}


def from_network(name: str) -> set[str]:
    url = f"{INDEX}/{index_path(name)}"
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        lines = response.read().decode("utf-8").splitlines()
    return yanked_of(map(json.loads, filter(None, lines)))


def cache_dirs() -> list[str]:
    home = os.environ.get("CARGO_HOME") or os.path.expanduser("~/.cargo")
    return sorted(glob.glob(os.path.join(home, "registry", "index", "index.crates.io-*", ".cache")))


def from_cache(name: str, dirs: list[str]) -> set[str] | None:
    """Yanked versions per cargo's cache file, or None where there is none.

    The file is cargo's own: a version byte, a 4-byte index format, the
    index's revision ending in NUL, then (version NUL, JSON line NUL) pairs.
    """
    for directory in dirs:
        path = os.path.join(directory, index_path(name))
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue
        fields = data[5:].split(b"\0")
        # fields[0] is the revision; then version, entry, version, entry, ...
        entries = [json.loads(blob) for blob in fields[2::2] if blob.strip()]
        return yanked_of(entries)
    return None


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
            yanked = dict(zip(names, pool.map(from_network, names)))
        where = "index.crates.io"
    except (urllib.error.URLError, TimeoutError) as err:
        dirs = cache_dirs()
        print(f"index.crates.io could not be read ({err}); reading cargo's index cache {dirs}", file=sys.stderr)
        yanked = {name: from_cache(name, dirs) for name in names}
        where = "cargo's index cache"
    unread = sorted(name for name, versions in yanked.items() if versions is None)
    withdrawn = sorted((n, v) for n, v in locked if yanked[n] is not None and v in yanked[n])
    for name, version in withdrawn:
        print(f"{lock_path}: {name} {version} is yanked on crates.io: `cargo update -p {name}@{version}`")
    if unread:
        print(f"not checked (in no index this machine can read): {', '.join(unread)}", file=sys.stderr)
    read = sum(1 for name, _ in locked if yanked[name] is not None)
    print(f"{read} of {len(locked)} locked crates read from {where}, {len(withdrawn)} yanked", file=sys.stderr)
    return 1 if withdrawn else 0


if __name__ == "__main__":
    sys.exit(main())

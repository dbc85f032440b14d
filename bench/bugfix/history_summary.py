#!/usr/bin/env python3
"""Summarizes the history bench (history.sh): history tasks per project, and 10 drawn at random
(seed 53) with their function, release, gold patch and a failing hidden test."""

import argparse
import collections
import json
import pathlib
import random
import subprocess

ap = argparse.ArgumentParser()
ap.add_argument("--work", required=True)
ap.add_argument("--results", required=True)
args = ap.parse_args()
work = pathlib.Path(args.work)
out = work / "out"


def jsonl(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


build = json.loads((work / "build.json").read_text() or "{}")
tasks = [t for t in jsonl(out / "bugfix.jsonl") if t["origin"] == "history"]
instances = jsonl(out / "dataset.jsonl")
failures = [f for f in jsonl(out / "failures.jsonl") if f["stage"] == "bugfix"]
by_repo = collections.Counter(t["repo"] for t in tasks)
inst_by_repo = collections.Counter(i["repo"] for i in instances)
refactors = collections.Counter(f["repo"] for f in failures if "refactor" in f["reason"])
no_run = collections.Counter(f["repo"] for f in failures if "does not run" in f["reason"])
moved = collections.Counter(f["repo"] for f in failures if "no longer has" in f["reason"])
repos = sorted(set(inst_by_repo) | set(by_repo))


def release(t):
    repo = work / "repos" / t["repo"]
    return subprocess.run(
        ["git", "-C", str(repo), "log", "-1", "--format=%s", t["history_commit"]],
        capture_output=True, text=True).stdout.strip()


print("| project | instances | history tasks | refactors (no task) | earlier body does not run "
      "| fails only on a name its module lost |")
print("|---|---|---|---|---|---|")
for r in repos:
    print(f"| {r} | {inst_by_repo[r]} | {by_repo[r]} | {refactors[r]} | {no_run[r]} | {moved[r]} |")
print(f"| **all** | {len(instances)} | **{len(tasks)}** | {sum(refactors.values())} "
      f"| {sum(no_run.values())} | {sum(moved.values())} |")
print()
f2p = [len(t["FAIL_TO_PASS"]) for t in tasks]
if f2p:
    print(f"FAIL_TO_PASS per task: mean {sum(f2p) / len(f2p):.1f}, min {min(f2p)}, max {max(f2p)}")
wall = (work / "time.txt").read_text().strip() if (work / "time.txt").exists() else "?"
print(f"build: {wall}")
drawn = random.Random(53).sample(tasks, min(10, len(tasks)))
shown = []
for t in drawn:
    loc = t["locations"][0]
    item = {
        "task": t["instance_id"],
        "function": f"{loc['file']}:{loc['function']}",
        "release": release(t),
        "patch": t["patch"],
        "failing_test": t["FAIL_TO_PASS"][0],
        "statement": t["problem_statement"],
    }
    shown.append(item)
    print(f"\n### {item['function']} ({item['release']})\n")
    print(f"failing: `{item['failing_test']}`\n")
    print("```diff\n" + item["patch"] + "```")
    print("\n> " + item["statement"].replace("\n", "\n> "))
pathlib.Path(args.results).write_text(json.dumps({
    "tasks": len(tasks),
    "per_repo": dict(by_repo),
    "instances": dict(inst_by_repo),
    "refactors": dict(refactors),
    "earlier_does_not_run": dict(no_run),
    "earlier_lost_a_name": dict(moved),
    "fail_to_pass": f2p,
    "build": wall,
    "stages": build.get("stages"),
    "drawn": shown,
}, indent=1) + "\n")

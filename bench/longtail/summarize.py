#!/usr/bin/env python3
"""Summarizes a long-tail benchmark build (bench/longtail/run.sh): per project and pooled,
candidates, valid harnesses, instances and failure classes from the build's own records
(`build.json`, the output's `functions.jsonl`, `harnesses.jsonl`, `failures.jsonl`), and where
the time went (the summary's per-repository stage seconds, when the binary reports them), with
instances per machine-hour."""
import argparse
import collections
import json
import os
import sys


def jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def pct(a, b):
    return f"{100.0 * a / b:.1f}" if b else "–"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--wall", type=float, required=True, help="the build's wall seconds")
    ap.add_argument("--cores", type=int, required=True)
    ap.add_argument("--r2e-commit", default="?")
    ap.add_argument("--results", action="append", default=[])
    a = ap.parse_args()

    with open(os.path.join(a.work, "build.json"), encoding="utf-8") as f:
        summary = json.load(f)
    out = summary["output"]
    if not os.path.isabs(out):
        out = os.path.join(a.work, out)
    functions = {r["id"]: r for r in jsonl(os.path.join(out, "functions.jsonl"))}
    harnesses = jsonl(os.path.join(out, "harnesses.jsonl"))
    failures = jsonl(os.path.join(out, "failures.jsonl"))

    classes = collections.defaultdict(collections.Counter)
    # Harnesses that kept no test at all, per repository (a subset of their failures).
    zero_tests = collections.Counter()
    no_tests = collections.Counter()
    for h in harnesses:
        f = functions.get(h["id"])
        repo = f["repo"] if f else h["id"].split(":", 1)[0]
        if not h.get("valid"):
            classes[repo][h.get("failure_class") or "invalid"] += 1
        if h.get("tests") == 0:
            zero_tests[repo] += 1
            no_tests[h.get("no_tests") or "unknown"] += 1
    env_failures = collections.defaultdict(list)
    for r in failures:
        if r.get("stage") == "env":
            env_failures[r["repo"]].append(r.get("reason", ""))

    rows = []
    pooled = collections.Counter()
    pooled_classes = collections.Counter()
    stage_names = ["env", "generate", "validate", "mutate"]
    pooled_seconds = collections.Counter()
    # The summary's `time`: per repository, each stage's seconds and units computed and cached.
    times = {t["repo"]: t for t in summary.get("time", [])}
    for r in summary.get("repos", []):
        repo = r["repo"]
        cand = r.get("candidates", 0)
        valid = r.get("harnesses_valid") or 0
        inst = r.get("instances") or 0
        secs = {k: v["seconds"] for k, v in times.get(repo, {}).items() if isinstance(v, dict)}
        row = {
            "project": repo,
            "functions": r.get("functions", 0),
            "candidates": cand,
            "excluded_by": r.get("excluded_by", {}),
            "valid": valid,
            "instances": inst,
            "failure_classes": dict(classes[repo]),
            "zero_test_harnesses": zero_tests[repo],
            "env_failures": env_failures.get(repo, []),
            "seconds": {k: secs.get(k) for k in stage_names if k in secs},
        }
        rows.append(row)
        pooled.update(candidates=cand, valid=valid, instances=inst, functions=row["functions"],
                      zero_test_harnesses=zero_tests[repo])
        pooled_classes.update(classes[repo])
        for k in stage_names:
            if isinstance(secs.get(k), (int, float)):
                pooled_seconds[k] += secs[k]

    print(f"r2e {a.r2e_commit}; build {a.wall:.0f} s wall on {a.cores} cores\n")
    print("| project | candidates | valid | valid % | instances | instances % | failure classes | env (s) | generate (s) | validate (s) | mutate (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        fc = ", ".join(f"{k} {v}" for k, v in sorted(row["failure_classes"].items(), key=lambda kv: -kv[1]))
        if row["env_failures"]:
            fc = (fc + "; " if fc else "") + "env: " + "; ".join(row["env_failures"])[:120]
        s = row["seconds"]
        cell = lambda k: f"{s[k]:.1f}" if isinstance(s.get(k), (int, float)) else "–"
        print(f"| {row['project']} | {row['candidates']} | {row['valid']} | {pct(row['valid'], row['candidates'])} | "
              f"{row['instances']} | {pct(row['instances'], row['candidates'])} | {fc or '–'} | "
              f"{cell('env')} | {cell('generate')} | {cell('validate')} | {cell('mutate')} |")
    c = pooled["candidates"]
    nnr = pooled_classes.get("no_normal_return", 0)
    print(f"| **pooled** | {c} | {pooled['valid']} | **{pct(pooled['valid'], c)}** | {pooled['instances']} | "
          f"**{pct(pooled['instances'], c)}** | " + ", ".join(f"{k} {v}" for k, v in pooled_classes.most_common()) +
          " | " + " | ".join(f"{pooled_seconds[k]:.0f}" if k in pooled_seconds else "–" for k in stage_names) + " |")
    print()
    excluded = summary.get("excluded_by", {})
    print("Filters (functions excluded, pooled): " + ", ".join(f"{k} {v}" for k, v in excluded.items() if v))
    print(f"no_normal_return: {nnr}/{c} candidates ({pct(nnr, c)}%)")
    zero = pooled["zero_test_harnesses"]
    print(f"harnesses with 0 tests: {zero}/{c} candidates ({pct(zero, c)}%): "
          + ", ".join(f"{k} {v}" for k, v in no_tests.most_common()))
    zero_env = [row["project"] for row in rows if row["candidates"] and not row["instances"] and row["env_failures"]]
    print(f"projects with candidates and 0 instances because of their environment: {len(zero_env)} {zero_env}")
    machine_hours = a.wall * a.cores / 3600.0
    wall_hours = a.wall / 3600.0
    print(f"instances per machine-hour ({a.cores} cores x {a.wall:.0f} s = {machine_hours:.3f} core-hours): "
          f"{pooled['instances'] / machine_hours:.0f} per core-hour, {pooled['instances'] / wall_hours:.0f} per hour of this machine")
    if c and pooled_seconds:
        print("seconds per candidate by stage (summed over repositories, wall seconds of the stage's work): " +
              ", ".join(f"{k} {pooled_seconds[k] / c:.2f}" for k in stage_names if k in pooled_seconds))
    result = {
        "r2e_commit": a.r2e_commit, "wall_seconds": a.wall, "cores": a.cores,
        "pooled": dict(pooled), "failure_classes": dict(pooled_classes), "no_tests": dict(no_tests),
        "excluded_by": excluded, "seconds": dict(pooled_seconds), "projects": rows,
        "instances_per_machine_hour": pooled["instances"] / wall_hours if wall_hours else None,
        "instances_per_core_hour": pooled["instances"] / machine_hours if machine_hours else None,
    }
    for path in a.results:
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1, sort_keys=True)
        os.replace(path + ".tmp", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

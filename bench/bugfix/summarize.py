#!/usr/bin/env python3
"""Summarizes a bug-fix benchmark build (bench/bugfix/run.sh) from its own records: the output's
`bugfix.jsonl`, `dataset.jsonl` and `failures.jsonl`, and the build's summary (`build.json`,
with each repository's stage seconds) and wall time (`time.txt`)."""
import argparse
import collections
import json
import os
import statistics


def jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--results", action="append", default=[])
    a = ap.parse_args()
    with open(os.path.join(a.work, "build.json"), encoding="utf-8") as f:
        summary = json.load(f)
    out = summary["output"]
    if not os.path.isabs(out):
        out = os.path.join(a.work, out)
    tasks = jsonl(os.path.join(out, "bugfix.jsonl"))
    instances = jsonl(os.path.join(out, "dataset.jsonl"))
    rejected = [r for r in jsonl(os.path.join(out, "failures.jsonl")) if r.get("stage") == "bugfix"]
    with open(os.path.join(a.work, "time.txt"), encoding="utf-8") as f:
        wall = float(f.read().split()[0])

    per_repo = collections.Counter(t["repo"] for t in tasks)
    inst_per_repo = collections.Counter(i["repo"] for i in instances)
    per_instance = collections.Counter(t["instance"] for t in tasks)
    origins = collections.Counter(t["origin"] for t in tasks)
    depths = collections.Counter(t["depth"] for t in tasks)
    kinds = collections.Counter(t.get("mutant_kind") for t in tasks)
    f2p = [len(t["FAIL_TO_PASS"]) for t in tasks]
    p2p = [len(t["PASS_TO_PASS"]) for t in tasks]
    synthetic = [t for t in tasks if t["origin"] == "mutant"]
    unknown = sum(1 for t in synthetic if t.get("caught_by_project_tests") is None)
    uncaught = sum(1 for t in synthetic if t.get("caught_by_project_tests") is False)
    seconds = collections.Counter()
    for t in summary.get("time", []):
        for stage, v in t.items():
            if isinstance(v, dict) and "seconds" in v:
                seconds[stage] += v["seconds"]
    # The bug-fix stage: its checks of the broken states, and the project's tests on them.
    bugfix_stages = ("bugfix", "bugfix_tests")
    checks_s = seconds.get("bugfix", 0.0)
    tests_s = seconds.get("bugfix_tests", 0.0)
    bug_s = checks_s + tests_s

    print(f"\n## Bug-fix tasks\n")
    print("| project | instances | tasks | tasks per instance |\n|---|---|---|---|")
    for repo in sorted(inst_per_repo):
        n, i = per_repo[repo], inst_per_repo[repo]
        print(f"| {repo} | {i} | {n} | {n / i:.2f} |")
    n_inst = len(instances)
    mean = len(tasks) / n_inst if n_inst else 0.0
    print(f"| **pooled** | {n_inst} | {len(tasks)} | **{mean:.2f}** |\n")
    print(f"instances with at least one task: {len(per_instance)}/{n_inst}")
    print("per origin: " + ", ".join(f"{k} {v}" for k, v in origins.most_common()))
    print("per depth: " + ", ".join(f"{k} {v}" for k, v in sorted(depths.items())))
    print("per mutant kind: " + ", ".join(f"{k} {v}" for k, v in kinds.most_common()))
    if f2p:
        print(f"FAIL_TO_PASS per task: mean {statistics.mean(f2p):.2f}, median {statistics.median(f2p)}, "
              f"min {min(f2p)}, max {max(f2p)}; PASS_TO_PASS mean {statistics.mean(p2p):.2f}")
    print(f"synthetic tasks no project test catches: {uncaught}/{len(synthetic)}"
          + (f" ({unknown} not known: the project's tests were not run on them)" if unknown else ""))
    print(f"broken states judged and left out: {len(rejected)}")
    # Stage seconds are summed over the workers that ran side by side, in every stage alike:
    # the bug-fix stage's against all the others' is the share it adds to the build's work.
    others = sum(v for k, v in seconds.items() if k not in bugfix_stages)
    if others > 0:
        print(f"bug-fix stage: {bug_s:.0f} s of stage time against {others:.0f} s for env, generate, "
              f"validate and mutate: +{100.0 * bug_s / others:.1f}% (the build: {wall:.0f} s wall); "
              f"of it, the broken states' checks {checks_s:.0f} s, the project's tests on them "
              f"{tests_s:.0f} s")
    result = {
        "tasks": len(tasks), "instances": n_inst, "tasks_per_instance": mean,
        "instances_with_tasks": len(per_instance), "per_repo": dict(per_repo),
        "per_origin": dict(origins), "per_depth": {str(k): v for k, v in depths.items()},
        "per_kind": dict(kinds), "fail_to_pass": f2p, "pass_to_pass": p2p,
        "synthetic_uncaught": uncaught, "synthetic_unknown": unknown, "rejected": len(rejected),
        "bugfix_seconds": bug_s, "bugfix_check_seconds": checks_s,
        "bugfix_tests_seconds": tests_s, "wall_seconds": wall, "stage_seconds": dict(seconds),
    }
    for path in a.results:
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1, sort_keys=True)
        os.replace(path + ".tmp", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

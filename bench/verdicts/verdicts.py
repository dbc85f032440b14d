"""Measures r2e's harnesses and verdicts on a built pipeline (standard library only).

    python3 verdicts.py --r2e R2E --pipeline PIPELINE.toml --work DIR [--results FILE]

Reads the build's outputs (harnesses.jsonl, dataset.jsonl, functions.jsonl), makes candidates
for every instance (the original itself, mutants from mutants.py, equivalent rewrites from
rewrites.py), checks them all with `r2e check -p PIPELINE --candidates FILE` (one file per
project), and prints, per project and pooled:

1. valid harnesses as % of candidates;
2. the mean branch coverage of the valid harnesses (line coverage for functions without
   branches, as r2e's report counts it);
3. originals passing `check` (% of instances);
4. mutants killed (% of mutants of instances whose original passes), per kind too, with a sample
   of the survivors, and, with --oracle, which survivors the project's own test suite kills
   (those are certainly not equivalent) and which it does not (plausibly equivalent);
5. equivalent rewrites rejected (should be 0), per kind, each rejection with its instance id and
   the failing test's message.

Everything goes to stdout and to results.json.
"""

import argparse
import collections
import hashlib
import json
import os
import subprocess
import sys
import time
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import mutants as mutants_mod  # noqa: E402
import rewrites as rewrites_mod  # noqa: E402
from source import Original  # noqa: E402

TARGETS = {"valid_pct": 80.0, "coverage": 0.85, "original_pass_pct": 100.0, "killed_pct": 90.0, "rejected": 0}


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def pct(a, b):
    return round(100.0 * a / b, 1) if b else None


def mean(xs):
    return round(sum(xs) / len(xs), 4) if xs else None


def load_pipeline(path):
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    base = os.path.dirname(os.path.abspath(path))
    out = os.path.join(base, cfg.get("project", {}).get("output", "out"))
    roots = {}
    for r in cfg.get("repo", []):
        p = os.path.join(base, r["path"])
        roots[r.get("name") or os.path.basename(os.path.normpath(p))] = p
    return out, roots


# ---------------------------------------------------------------------------------------------
# 1 and 2: harnesses


def harness_figures(out, repos):
    rows = {r: {"candidates": 0, "valid": 0, "cov": [], "bcov": [], "failures": collections.Counter()} for r in repos}
    for h in read_jsonl(os.path.join(out, "harnesses.jsonl")):
        repo = h["id"].split(":", 1)[0]
        r = rows.setdefault(repo, {"candidates": 0, "valid": 0, "cov": [], "bcov": [], "failures": collections.Counter()})
        r["candidates"] += 1
        if h["valid"]:
            r["valid"] += 1
            cov = h["branch_coverage"] if h["branch_coverage"] is not None else h["line_coverage"]
            r["cov"].append(cov or 0.0)
            if h["branch_coverage"] is not None:
                r["bcov"].append(h["branch_coverage"])
        else:
            r["failures"][h["failure_class"]] += 1
    result = {}
    pooled = {"candidates": 0, "valid": 0, "cov": [], "bcov": [], "failures": collections.Counter()}
    for repo, r in rows.items():
        result[repo] = {
            "candidates": r["candidates"],
            "valid": r["valid"],
            "valid_pct": pct(r["valid"], r["candidates"]),
            "coverage_of_valid": mean(r["cov"]),
            "branch_coverage_of_valid_with_branches": mean(r["bcov"]),
            "valid_with_branches": len(r["bcov"]),
            "failures": dict(r["failures"].most_common()),
        }
        pooled["candidates"] += r["candidates"]
        pooled["valid"] += r["valid"]
        pooled["cov"] += r["cov"]
        pooled["bcov"] += r["bcov"]
        pooled["failures"].update(r["failures"])
    result["pooled"] = {
        "candidates": pooled["candidates"],
        "valid": pooled["valid"],
        "valid_pct": pct(pooled["valid"], pooled["candidates"]),
        "coverage_of_valid": mean(pooled["cov"]),
        "branch_coverage_of_valid_with_branches": mean(pooled["bcov"]),
        "valid_with_branches": len(pooled["bcov"]),
        "failures": dict(pooled["failures"].most_common()),
    }
    return result


# ---------------------------------------------------------------------------------------------
# Candidates


def make_candidates(out, roots, per_kind):
    """Per repo: a list of (line for --candidates, meta)."""
    functions = {f["id"]: f for f in read_jsonl(os.path.join(out, "functions.jsonl"))}
    instances = read_jsonl(os.path.join(out, "dataset.jsonl"))
    by_repo = collections.OrderedDict((r, []) for r in roots)
    originals = {}
    problems = []
    for inst in instances:
        try:
            o = Original(inst, functions[inst["id"]], roots[inst["repo"]])
        except Exception as e:  # recorded, not fatal
            problems.append({"id": inst["id"], "error": f"{type(e).__name__}: {e}"})
            continue
        originals[inst["id"]] = o
        rows = by_repo.setdefault(inst["repo"], [])
        rows.append(({"id": o.id, "candidate": o.text, "label": "original"}, {"id": o.id, "role": "original", "kind": "original"}))
        for k, m in enumerate(mutants_mod.mutants(o.id, o.tree, per_kind)):
            label = f"mutant:{m['kind']}:{k}"
            rows.append(
                (
                    {"id": o.id, "candidate": m["text"], "label": label},
                    {"id": o.id, "role": "mutant", "kind": m["kind"], "description": m["description"], "line": m["line"], "at": m["at"]},
                )
            )
        for r in rewrites_mod.rewrites(o.text, o.tree, o):
            label = f"rewrite:{r['kind']}"
            rows.append(
                (
                    {"id": o.id, "candidate": r["text"], "label": label},
                    {"id": o.id, "role": "rewrite", "kind": r["kind"], "sites": r["sites"]},
                )
            )
    return by_repo, originals, problems


def run_check(r2e, pipeline, lines, path, reuse):
    """Runs `r2e check --candidates` on `lines`; the reports, in order, or an error text."""
    payload = "".join(json.dumps(l) + "\n" for l in lines)
    key = hashlib.sha256(payload.encode()).hexdigest()
    verdicts = path + ".verdicts.jsonl"
    if reuse and os.path.exists(verdicts) and os.path.exists(path + ".key"):
        if open(path + ".key").read() == key:
            return read_jsonl(verdicts), None, 0.0
    with open(path, "w", encoding="utf-8") as f:
        f.write(payload)
    start = time.time()
    p = subprocess.run(
        [r2e, "check", "-p", pipeline, "--candidates", path],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    took = time.time() - start
    with open(path + ".stderr", "w") as f:
        f.write(p.stderr)
    if p.returncode not in (0, 1):
        return None, f"r2e check exited {p.returncode}: {p.stderr.strip()[-2000:]}", took
    reports = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    if len(reports) != len(lines):
        return None, f"r2e check printed {len(reports)} verdicts for {len(lines)} candidates", took
    with open(verdicts, "w") as f:
        f.write(p.stdout)
    with open(path + ".key", "w") as f:
        f.write(key)
    return reports, None, took


def failure_text(report, limit=1500):
    """The first failing test's name, message, call, expected and actual (or the error)."""
    if report.get("error"):
        return f"[{report.get('failure_class')}] {report['error']}"[:limit]
    for t in report.get("tests", []):
        if not t["passed"]:
            parts = [f"test {t['name']}"]
            if t.get("message"):
                parts.append(f"message: {t['message']}")
            for i, call in enumerate(t.get("inputs", [])[:2]):
                parts.append(f"call: {call}")
                if i < len(t.get("expected", [])):
                    parts.append(f"expected: {t['expected'][i]}")
                if i < len(t.get("actual", [])):
                    parts.append(f"got: {t['actual'][i]}")
            return "\n".join(parts)[:limit]
    return "(failed, no failing test recorded)"


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--r2e", required=True)
    ap.add_argument("--pipeline", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--results", action="append", default=[], help="where to write results.json (repeatable)")
    ap.add_argument("--per-kind", type=int, default=3)
    ap.add_argument("--reuse", action="store_true", help="reuse verdicts of identical candidate files")
    ap.add_argument("--oracle-python", help="a Python with pytest: run the projects' own tests on survivors")
    ap.add_argument("--oracle-max", type=int, default=1000, help="at most this many survivors per project for the oracle")
    ap.add_argument("--sample", type=int, default=40, help="survivors printed")
    ap.add_argument("--r2e-commit", default=None, help="the commit the r2e binary was built from (recorded)")
    args = ap.parse_args()

    out, roots = load_pipeline(args.pipeline)
    repos = list(roots)
    results = {
        "targets": TARGETS,
        "date": time.strftime("%Y-%m-%d"),
        "r2e": os.path.abspath(args.r2e),
        "r2e_commit": args.r2e_commit,
    }

    # 1, 2
    hf = harness_figures(out, repos)
    results["harnesses"] = hf

    # Candidates
    by_repo, originals, problems = make_candidates(out, roots, args.per_kind)
    results["source_problems"] = problems
    cand_dir = os.path.join(args.work, "candidates")
    os.makedirs(cand_dir, exist_ok=True)

    records = []  # meta + report
    check_errors = {}
    timings = {}
    for repo, rows in by_repo.items():
        if not rows:
            continue
        reports, err, took = run_check(args.r2e, args.pipeline, [l for l, _ in rows], os.path.join(cand_dir, f"{repo}.jsonl"), args.reuse)
        timings[repo] = {"candidates": len(rows), "seconds": round(took, 1)}
        print(f"[check] {repo}: {len(rows)} candidates in {took:.0f} s" + (f" ERROR {err}" if err else ""), file=sys.stderr, flush=True)
        if err:
            check_errors[repo] = err
            continue
        for (line, meta), rep in zip(rows, reports):
            assert rep["id"] == line["id"] and rep.get("label") == line["label"], (rep["id"], line["id"])
            records.append({**meta, "repo": repo, "passed": rep["passed"], "report": rep, "text": line["candidate"]})
    results["check_errors"] = check_errors
    results["check_timings"] = timings

    # 3: originals
    orig_ok = {}
    orig = {r: {"instances": 0, "passed": 0} for r in repos}
    original_failures = []
    for rec in records:
        if rec["role"] != "original":
            continue
        o = orig.setdefault(rec["repo"], {"instances": 0, "passed": 0})
        o["instances"] += 1
        o["passed"] += rec["passed"]
        orig_ok[rec["id"]] = rec["passed"]
        if not rec["passed"]:
            original_failures.append({"id": rec["id"], "failure": failure_text(rec["report"])})
    pooled = {"instances": sum(o["instances"] for o in orig.values()), "passed": sum(o["passed"] for o in orig.values())}
    for o in list(orig.values()) + [pooled]:
        o["passed_pct"] = pct(o["passed"], o["instances"])
    orig["pooled"] = pooled
    results["originals"] = {"per_project": orig, "failures": original_failures}

    # 4: mutants (of instances whose original passes)
    def kill_table(recs):
        table = collections.OrderedDict()
        for key in repos + ["pooled"]:
            table[key] = {"total": 0, "killed": 0}
        kinds = collections.OrderedDict((k, {"total": 0, "killed": 0}) for k in mutants_mod.KINDS)
        for rec in recs:
            for key in (rec["repo"], "pooled"):
                table[key]["total"] += 1
                table[key]["killed"] += not rec["passed"]
            kinds[rec["kind"]]["total"] += 1
            kinds[rec["kind"]]["killed"] += not rec["passed"]
        for t in list(table.values()) + list(kinds.values()):
            t["killed_pct"] = pct(t["killed"], t["total"])
        return table, kinds

    muts = [r for r in records if r["role"] == "mutant" and orig_ok.get(r["id"])]
    excluded = sum(1 for r in records if r["role"] == "mutant" and not orig_ok.get(r["id"]))
    per_project, per_kind = kill_table(muts)
    kinds_by_project = {}
    for repo in repos:
        _, k = kill_table([r for r in muts if r["repo"] == repo])
        kinds_by_project[repo] = {kind: f"{v['killed']}/{v['total']}" for kind, v in k.items() if v["total"]}
    survivors = [r for r in muts if r["passed"]]
    survivor_rows = [
        {"id": r["id"], "kind": r["kind"], "description": r["description"], "at": r["at"], "text": r["text"]}
        for r in survivors
    ]
    results["mutants"] = {
        "per_project": per_project,
        "per_kind": per_kind,
        "per_kind_by_project": kinds_by_project,
        "excluded_original_fails": excluded,
        "survivors": survivor_rows,
    }
    # Mutants' failure classes (how they were killed).
    how = collections.Counter()
    for r in muts:
        if not r["passed"]:
            how[r["report"].get("failure_class") or "assertion"] += 1
    results["mutants"]["killed_by_class"] = dict(how.most_common())

    # Oracle: the project's own tests on survivors.
    if args.oracle_python and survivors:
        import oracle

        controls = {r["id"]: r["text"] for r in records if r["role"] == "rewrite" and r["kind"] == "unparsed"}
        verdicts = oracle.run(
            os.path.abspath(args.r2e),
            args.oracle_python, roots, originals, survivors, os.path.join(args.work, "oracle"), args.oracle_max, controls
        )
        for row, r in zip(survivor_rows, survivors):
            row["project_tests"] = verdicts.get(id(r))
        counts = collections.Counter(row.get("project_tests") or "not_run" for row in survivor_rows)
        results["mutants"]["survivors_by_project_tests"] = dict(counts)

    # 5: rewrites
    rws = [r for r in records if r["role"] == "rewrite"]
    rw_kinds = collections.OrderedDict((k, {"total": 0, "rejected": 0}) for k in rewrites_mod.KINDS)
    rw_projects = collections.OrderedDict((k, {"total": 0, "rejected": 0}) for k in repos + ["pooled"])
    rejected = []
    for r in rws:
        rw_kinds[r["kind"]]["total"] += 1
        rw_kinds[r["kind"]]["rejected"] += not r["passed"]
        for key in (r["repo"], "pooled"):
            rw_projects[key]["total"] += 1
            rw_projects[key]["rejected"] += not r["passed"]
        if not r["passed"]:
            rejected.append(
                {
                    "id": r["id"],
                    "kind": r["kind"],
                    "original_passes": orig_ok.get(r["id"]),
                    "failure": failure_text(r["report"]),
                    "text": r["text"],
                }
            )
    # Passed, but some call's outcome reads differently from the reference's (what the policy
    # lets through: an exception's wording, a float's last digits). Expected for raise_message;
    # for any other kind it shows a rewrite that changed something the harness does not judge.
    differing = []
    for r in rws:
        if not r["passed"]:
            continue
        for t in r["report"].get("tests", []):
            pairs = list(zip(t.get("expected", []), t.get("actual", [])))
            diff = [(e, a) for e, a in pairs if e != a]
            if diff:
                differing.append(
                    {"id": r["id"], "kind": r["kind"], "test": t["name"], "expected": diff[0][0][:300], "actual": diff[0][1][:300]}
                )
                break
    results["rewrites"] = {
        "per_kind": rw_kinds,
        "per_project": rw_projects,
        "rejected": rejected,
        "passed_with_different_outcome_text": differing,
    }

    for path in args.results:
        with open(path, "w") as f:
            json.dump(results, f, indent=1, sort_keys=False)
            f.write("\n")
    print_report(results, repos, args.sample)


def print_report(res, repos, sample):
    h = res["harnesses"]
    print("## 1-2. Harnesses (every r2e default)\n")
    print("| project | candidates | valid | valid % (>= 80) | coverage of valid (>= 0.85) | branch coverage, valid with branches | failures |")
    print("|---|---|---|---|---|---|---|")
    for key in repos + ["pooled"]:
        r = h.get(key)
        if not r:
            continue
        fails = ", ".join(f"{k} {v}" for k, v in r["failures"].items())
        bc = f"{r['branch_coverage_of_valid_with_branches']} ({r['valid_with_branches']})"
        print(f"| {key} | {r['candidates']} | {r['valid']} | {r['valid_pct']} | {r['coverage_of_valid']} | {bc} | {fails} |")

    o = res["originals"]["per_project"]
    m = res["mutants"]["per_project"]
    w = res["rewrites"]["per_project"]
    print("\n## 3-5. Verdicts\n")
    print("| project | instances | original passes (100%) | mutants killed (>= 90%) | rewrites rejected (0) |")
    print("|---|---|---|---|---|")
    for key in repos + ["pooled"]:
        oo, mm, ww = o.get(key, {}), m.get(key, {}), w.get(key, {})
        print(
            f"| {key} | {oo.get('instances', 0)} | {oo.get('passed', 0)}/{oo.get('instances', 0)} ({oo.get('passed_pct')}%) "
            f"| {mm.get('killed', 0)}/{mm.get('total', 0)} ({mm.get('killed_pct')}%) | {ww.get('rejected', 0)}/{ww.get('total', 0)} |"
        )
    if res["check_errors"]:
        print("\ncheck errors:", json.dumps(res["check_errors"], indent=1))
    if res["source_problems"]:
        print("\noriginal text not found:", json.dumps(res["source_problems"], indent=1))

    print("\n### Mutants killed, per kind (pooled)\n")
    print("| kind | killed/total | % | " + " | ".join(repos) + " |")
    print("|---|---|---|" + "---|" * len(repos))
    byp = res["mutants"]["per_kind_by_project"]
    for kind, v in res["mutants"]["per_kind"].items():
        cells = " | ".join(byp.get(r, {}).get(kind, "-") for r in repos)
        print(f"| {kind} | {v['killed']}/{v['total']} | {v['killed_pct']} | {cells} |")
    print(f"\nmutants of instances whose original fails check (left out): {res['mutants']['excluded_original_fails']}")
    print("how mutants were killed (failure class):", json.dumps(res["mutants"]["killed_by_class"]))

    surv = res["mutants"]["survivors"]
    if "survivors_by_project_tests" in res["mutants"]:
        c = res["mutants"]["survivors_by_project_tests"]
        print(
            f"\nsurvivors: {len(surv)}; the project's own test suite kills {c.get('killed', 0)} of them (certainly not "
            f"equivalent: the harness misses them), {c.get('survived', 0)} survive it too (plausibly equivalent, or "
            f"untested by both); not run: {sum(v for k, v in c.items() if k not in ('killed', 'survived'))} {json.dumps(c)}"
        )
    print(f"\n### Surviving mutants (sample of {min(sample, len(surv))} of {len(surv)})\n")
    step = max(1, len(surv) // sample) if sample else 1
    for s in surv[::step][:sample]:
        tag = f" [project tests: {s['project_tests']}]" if s.get("project_tests") else ""
        print(f"- {s['id']}  {s['kind']}  {s['description']}  `{s['at'][:80]}`{tag}")

    print("\n### Equivalent rewrites rejected, per kind (must be 0)\n")
    print("| kind | rejected/total |")
    print("|---|---|")
    for kind, v in res["rewrites"]["per_kind"].items():
        print(f"| {kind} | {v['rejected']}/{v['total']} |")
    rej = res["rewrites"]["rejected"]
    if rej:
        print(f"\n### Rejected rewrites ({len(rej)})\n")
        for r in rej:
            print(f"- {r['id']}  [{r['kind']}]  (original passes: {r['original_passes']})")
            for line in r["failure"].splitlines()[:12]:
                print(f"    {line}")
    diff = res["rewrites"]["passed_with_different_outcome_text"]
    if diff:
        print(f"\n### Rewrites that pass with an outcome that reads differently ({len(diff)})\n")
        print("Allowed by the policy (exception messages are not compared); expected for raise_message only.\n")
        for d in diff:
            print(f"- {d['id']}  [{d['kind']}]  {d['test']}")
            print(f"    expected: {d['expected']}")
            print(f"    got:      {d['actual']}")
    if res["originals"]["failures"]:
        print(f"\n### Originals rejected ({len(res['originals']['failures'])})\n")
        for r in res["originals"]["failures"]:
            print(f"- {r['id']}")
            for line in r["failure"].splitlines()[:12]:
                print(f"    {line}")


if __name__ == "__main__":
    main()

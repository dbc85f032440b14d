#!/usr/bin/env bash
# A build spread over 1, 2 and 3 "hosts" of this machine: each host is its own local cache
# folder, the remote store a `file://` folder (a fresh one for each N and each mode). Six
# projects: the three examples of this repository and three small PyPI projects (sdists from
# `pip download --no-binary :all: --no-deps`, into a temporary folder; PYPI="NAME==VER ..."
# picks others). Usage: bash bench/cluster.sh  (R2E_BIN=path measures that binary; R2E_KEEP=1
# keeps the work folder; NS="1 2 3" picks the host counts; REF=VERSION skips the plain build).
# Shards count from 0: `--shard 0/N` to `--shard N-1/N`.
#
# PROJECTS=FILE builds the source releases FILE names instead (`NAME==VERSION` per line, `#`
# comments: bench/longtail/projects.txt gives 30), without the examples. PLAN picks how
# repositories go to shards: unset, by the hash of their name; `cold`, by a plan of
# `r2e status --plan N --json` on an empty cache (candidates); `measured`, by one on the plain
# build's cache and output (its timings; needs the plain build, so not with REF), or on
# PLAN_FROM's (a folder with the pipeline.toml, cache and output of an earlier build of the
# same repositories by the same names: bench/longtail/run.sh's $R2E_LONGTAIL_DIR). Each shard
# then builds with `--plan FILE`. REF=- skips the plain build and compares the N runs' dataset
# versions with each other instead. MODES="concurrent alone" (the default) or "alone" (the
# shards one after another only: the busy times and the computed wall times need no more).
#
# First a plain one-machine build (no shard, no remote store) gives the reference dataset
# version. Then for each N:
#   - concurrent: the N shards (`--shard I/N`) at once, each with its own empty local cache,
#     one fresh store (they share this machine's cores), then the assemble (a plain build with
#     the store, on an empty local cache);
#   - alone: the N shards one after another on a second fresh store, each with an empty local
#     cache (each shard's own busy time), then its assemble (N=1: the concurrent run is alone).
# Prints per N: the actions each host started (per bucket, from its trace), the wall times,
# the dataset versions, whether an expensive key (envs, generate, validate, check, llm) was
# started on two hosts or by an assemble, the wall time N real machines would take (the
# slowest shard alone + the assemble) and a model from the traces of the shards run alone (the
# time each host had an action under way, the union of its actions' `started` to `stored`
# intervals; their sum is printed too, but a host runs many actions at once, so it is far more
# than any wall time; + the assemble); then a Markdown table.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ -z "${R2E_BIN:-}" ]; then
  cargo build --release --quiet --manifest-path "$here/../Cargo.toml"
fi
r2e="$(readlink -f "${R2E_BIN:-${CARGO_TARGET_DIR:-$here/../target}/release/r2e}")"
pypi=(${PYPI:-toolz==1.0.0 cachetools==5.5.0 inflection==0.5.1})
work=$(mktemp -d)
[ -n "${R2E_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT

# The PyPI projects, unpacked as $work/src/NAME (never part of this repository).
mkdir -p "$work/dl" "$work/src"
examples=("$here"/../examples/{textkit,shapes_ds,unitconv})
if [ -n "${PIPELINE:-}" ]; then
  pypi=()  # the given pipeline names its repositories by absolute path
  examples=()
elif [ -n "${PROJECTS:-}" ]; then
  mapfile -t pypi < <(grep -v '^#' "$PROJECTS" | grep -v '^$')
  examples=()
fi
for spec in "${pypi[@]}"; do
  pip download --quiet --no-binary :all: --no-deps "$spec" -d "$work/dl" >/dev/null
done
for f in $(find "$work/dl" -maxdepth 1 -type f | sort); do
  d=$(mktemp -d -p "$work")
  case "$f" in *.zip) unzip -q "$f" -d "$d" ;; *) tar xf "$f" -C "$d" ;; esac
  top=$(ls "$d")
  name=$(echo "$top" | sed -E 's/-[0-9][^-]*$//')
  mv "$d/$top" "$work/src/$name"
  rmdir "$d"
done

# The pipeline: the default one's settings, the six projects by absolute path; or PIPELINE's
# (one whose repositories have absolute paths and whose output and cache are relative: the
# long-tail bench's, so that its build is the one-machine reference of REF and PLAN_FROM).
if [ -n "${PIPELINE:-}" ]; then
  cp "$PIPELINE" "$work/pipeline.toml"
else {
  printf 'version = 1\n\n[project]\nname = "r2e-cluster-bench"\noutput = "out"\ncache = "cache"\n'
  for d in "${examples[@]}" "$work"/src/*; do
    # Named in lower case, as bench/longtail/run.sh names them (a plan made there fits here).
    printf '\n[[repo]]\npath = "%s"\nname = "%s"\n' "$(readlink -f "$d")" "$(basename "$d" | tr 'A-Z' 'a-z')"
  done
  printf '\n[context]\nstrategy = "sliced"\nmax_tokens = 6000\n'
} > "$work/pipeline.toml"
fi

python3 - "$r2e" "$work" ${NS:-1 2 3} <<'PY'
import collections, glob, json, os, shutil, subprocess, sys, time

r2e, work, ns = sys.argv[1], sys.argv[2], [int(n) for n in sys.argv[3:]]
PLAN = os.environ.get("PLAN", "")
MODES = os.environ.get("MODES", "concurrent alone").split()
if PLAN not in ("", "cold", "measured") or not set(MODES) <= {"concurrent", "alone"} or not MODES:
    sys.exit("PLAN is cold, measured or unset; MODES holds concurrent, alone or both")
PLAN_FROM = os.environ.get("PLAN_FROM")
if PLAN == "measured" and os.environ.get("REF") and not PLAN_FROM:
    sys.exit("PLAN=measured plans on the plain build's timings (or PLAN_FROM's): not with REF alone")
EXPENSIVE = ("envs", "actions/generate", "actions/validate", "actions/check", "actions/llm")
env = {**os.environ, "R2E_LOG": "timings"}

def rundir(label):
    d = f"{work}/runs/{label}"
    os.makedirs(d)
    shutil.copy(f"{work}/pipeline.toml", d)
    return d

def start(d, name, args):
    out, err = open(f"{d}/{name}.json", "wb"), open(f"{d}/{name}.err", "wb")
    return subprocess.Popen([r2e, "build", f"{d}/pipeline.toml", "--json", *args], stdout=out, stderr=err, env=env)

def finish(d, name, p, t0):
    rc = p.wait()
    s = time.perf_counter() - t0
    if rc != 0:
        sys.exit(f"{name} in {d} exited {rc}:\n" + open(f"{d}/{name}.err").read()[-3000:])
    return s

def version(d, name):
    text = open(f"{d}/{name}.json").read()
    return json.loads(text).get("dataset_version") if text.strip() else None

def shard_args(n, i, cache, store, plan=None):
    return ["--shard", f"{i}/{n}", "--cache", cache, "--remote-cache", f"file://{store}"] + (
        ["--plan", plan] if plan else [])

def make_plan(n, plain_dir):
    """The plan file for N shards (PLAN), or None: `r2e status --plan N --json` on the plain
    build's folder (its cache and timings) or on a fresh one (an empty cache)."""
    if not PLAN:
        return None
    d = (PLAN_FROM or plain_dir) if PLAN == "measured" else rundir(f"plan-cold-{n}")
    path = f"{work}/plan-{PLAN}-{n}.json"
    with open(path, "wb") as out:
        subprocess.run([r2e, "status", "-p", f"{d}/pipeline.toml", "--plan", str(n), "--json"],
                       stdout=out, check=True, env=env)
    plan = json.load(open(path))
    print(f"plan ({PLAN}): estimated seconds per shard "
          + " / ".join(f"{x:.0f}" for x in plan["shard_seconds"])
          + f"; bases {dict(collections.Counter(r['basis'] for r in plan['repos']))}")
    return path

def assemble(d, store):
    t0 = time.perf_counter()
    s = finish(d, "assemble", start(d, "assemble", ["--cache", f"{d}/cache-assemble", "--remote-cache", f"file://{store}"]), t0)
    return s, version(d, "assemble")

def traces(d):
    """{label: [events]} for each trace file of a run ('shard-I-of-N' or 'build')."""
    out = {}
    for f in sorted(glob.glob(f"{d}/.out.r2e/shards/*.trace.jsonl")):
        label = os.path.basename(f).split(".")[0]
        out[label] = [json.loads(l) for l in open(f) if l.strip()]
    return out

def short(bucket):
    return bucket.removeprefix("actions/").rsplit("-v", 1)[0]

def started(events):
    return collections.Counter(short(e["bucket"]) for e in events if e["event"] == "started")

def intervals(events):
    """Each action's (start, end) in ms: `started` to the next `stored` of the same key and bucket."""
    open_, out = {}, []
    for e in events:
        k = (e["bucket"], e["key"])
        if e["event"] == "started":
            open_[k] = e["time_ms"]
        elif e["event"] == "stored" and k in open_:
            out.append((open_.pop(k), e["time_ms"]))
    return sorted(out)

def action_sum(events):
    """The sum of action durations (actions overlap: a host runs several at once)."""
    return sum(b - a for a, b in intervals(events)) / 1000

def busy_seconds(events):
    """The time a host had at least one action under way (the union of the intervals)."""
    total, cur = 0, None
    for a, b in intervals(events):
        if cur is None or a > cur[1]:
            total += cur[1] - cur[0] if cur else 0
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return (total + (cur[1] - cur[0] if cur else 0)) / 1000

def ran_twice(tr):
    """Expensive keys started in more than one shard's trace, and any the assemble started."""
    where = collections.defaultdict(set)
    for label, evs in tr.items():
        for e in evs:
            if e["event"] == "started" and e["bucket"].startswith(EXPENSIVE):
                where[(e["bucket"], e["key"])].add(f"{label}@{e['host']}:{e['pid']}")
    twice = {k: v for k, v in where.items() if len(v) > 1}
    by_assemble = {k: v for k, v in where.items() if any(x.startswith("build") for x in v)}
    return twice, by_assemble

def repos_of(d, n, i):
    try:
        return json.load(open(f"{d}/.out.r2e/shards/shard-{i}-of-{n}.json"))["repos"]
    except (OSError, KeyError):
        return []

def fmt_counts(c):
    return ", ".join(f"{b} {c[b]}" for b in sorted(c)) or "none"

# The reference: a plain one-machine build (no shard, no store); REF=VERSION skips it (a
# version printed by an earlier run of this script with the same binary and projects, or by the
# long-tail bench's build of its pipeline with PIPELINE), PLAIN_S=SECONDS giving its wall time.
if os.environ.get("REF"):
    # PLAIN_S: that reference build's measured wall seconds, for the speed-ups (optional).
    ref, plain_s = os.environ["REF"], float(os.environ["PLAIN_S"]) if os.environ.get("PLAIN_S") else None
    print(f"plain one-machine build: skipped, reference version {ref} (REF)"
          + (f", {plain_s:.1f} s (PLAIN_S)" if plain_s else ""))
else:
    d = rundir("plain")
    t0 = time.perf_counter()
    plain_s = finish(d, "plain", start(d, "plain", ["--cache", f"{d}/cache"]), t0)
    plain = json.load(open(f"{d}/plain.json"))
    ref = plain["dataset_version"]
    print(f"plain one-machine build: {plain_s:.1f} s, version {ref}, counts {json.dumps(plain.get('counts'))}")
    print("  stages:", json.dumps({k: v.get("executed") for k, v in plain.get("stages", {}).items()}))

rows, problems = [], []
for n in ns:
    print(f"\n== N={n}")
    plan = make_plan(n, f"{work}/runs/plain")
    dc = None
    if "concurrent" in MODES:
        # Concurrent: the N hosts at once, one store.
        dc, store_c = rundir(f"{n}-concurrent"), f"{work}/stores/{n}-concurrent"
        t0 = time.perf_counter()
        ps = [start(dc, f"shard-{i}", shard_args(n, i, f"{dc}/cache-host{i}", store_c, plan)) for i in range(n)]
        # Each shard's own wall time: reaped as it ends, whichever ends first.
        own_c, left = [None] * n, set(range(n))
        while left:
            for i in [i for i in left if ps[i].poll() is not None]:
                own_c[i] = finish(dc, f"shard-{i}", ps[i], t0)
                left.discard(i)
            time.sleep(0.05)
        wall_c = time.perf_counter() - t0
        asm_c, ver_c = assemble(dc, store_c)
    # Alone: one after another, a second store (N=1: the concurrent run already was).
    if n == 1 and dc is not None:
        da, alone, asm_a, ver_a = dc, own_c, asm_c, ver_c
    else:
        da, store_a, alone = rundir(f"{n}-alone"), f"{work}/stores/{n}-alone", []
        for i in range(n):
            t0 = time.perf_counter()
            alone.append(finish(da, f"shard-{i}", start(da, f"shard-{i}", shard_args(n, i, f"{da}/cache-host{i}", store_a, plan)), t0))
        asm_a, ver_a = assemble(da, store_a)
    if dc is None:
        dc, wall_c, own_c, asm_c, ver_c = da, None, [None] * n, asm_a, ver_a
    for label, dd in (("concurrent", dc), ("alone", da)):
        if label == "alone" and da is dc and "concurrent" in MODES:
            continue
        if label == "concurrent" and "concurrent" not in MODES:
            continue
        tr = traces(dd)
        twice, by_asm = ran_twice(tr)
        for (b, k), v in twice.items():
            problems.append(f"N={n} {label}: {b} {k} started on {sorted(v)}")
        for (b, k), v in by_asm.items():
            problems.append(f"N={n} {label}: the assemble started {b} {k} ({sorted(v)})")
        print(f"{label}: " + ("nothing ran twice" if not twice else f"{len(twice)} expensive keys ran twice")
              + ("; the assemble started nothing expensive" if not by_asm else f"; the assemble started {len(by_asm)} expensive keys"))
        for lab in sorted(tr):
            print(f"  {lab}: started {fmt_counts(started(tr[lab]))}; actions under way {busy_seconds(tr[lab]):.1f} s"
                  f" (sum of action durations {action_sum(tr[lab]):.1f} s)")
    tr_a = traces(da)
    busy = [busy_seconds(tr_a.get(f"shard-{i}-of-{n}", [])) for i in range(n)]
    hosts = []
    for i in range(n):
        c = started(traces(dc).get(f"shard-{i}-of-{n}", []))
        hosts.append(f"h{i} ({', '.join(repos_of(dc, n, i)) or 'no repos'}): {sum(c.values())} ({fmt_counts(c)})")
    for v, what in ((ver_c, "concurrent assemble"), (ver_a, "alone assemble")):
        if ref == "-":
            ref = v  # no plain build: the first run's version is the one the others must build
        if v != ref:
            problems.append(f"N={n}: the {what} built version {v}, the plain build {ref}")
    row = dict(n=n, hosts=hosts, wall_c=wall_c, own_c=own_c, alone=alone, asm=asm_c, asm_a=asm_a,
               real=max(alone) + asm_c, busy=busy, model=max(busy) + asm_c,
               spread=max(busy) / min(busy) if min(busy) > 0 else float("inf"),
               version="same" if ver_c == ref == ver_a else f"{ver_c} / {ver_a}")
    rows.append(row)
    conc = "not run" if wall_c is None else f"{wall_c:.1f} s (each {', '.join(f'{s:.1f}' for s in own_c)})"
    print(f"concurrent wall {conc}; alone {', '.join(f'{s:.1f}' for s in alone)} s; "
          f"assemble {asm_c:.1f} s (alone run's {asm_a:.1f} s); versions {ver_c} {ver_a}")
    print(f"busy (actions under way, alone) {' / '.join(f'{b:.1f}' for b in busy)} s; largest over smallest {row['spread']:.2f}")

print("\n" + ("nothing ran twice, no assemble started an expensive action, every version equals the plain build's"
              if not problems else "PROBLEMS:\n  " + "\n  ".join(problems)))
print(f"\nplain one-machine build: {f'{plain_s:.1f} s' if plain_s else 'skipped (REF)'}, version `{ref}`\n")
# The speed-ups: against the plain one-machine build's wall time (when it ran) and against
# N=1's model (when N=1 ran).
one = next((r["model"] for r in rows if r["n"] == 1), None)
one_real = next((r["real"] for r in rows if r["n"] == 1), None)
print(f"plan: {PLAN or 'by name hash'}; modes: {' '.join(MODES)}\n")
print("| N | actions started per host (bucket counts) | concurrent shards wall | each shard concurrent | each shard alone | assemble | N machines (max alone + assemble) | model (max time with actions under way + assemble) | busy largest / smallest | speed-up (plain, else N=1's N machines / N machines; N=1 model / model) | version |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    conc = "not run" if r["wall_c"] is None else f"{r['wall_c']:.1f} s"
    each = "not run" if r["wall_c"] is None else " / ".join(f"{s:.1f}" for s in r["own_c"]) + " s"
    up = " ; ".join(x for x in (
        f"{(plain_s or one_real) / r['real']:.2f}x" if (plain_s or one_real) else "",
        f"{one / r['model']:.2f}x" if one else "") if x) or "-"
    print(f"| {r['n']} | {'<br>'.join(r['hosts'])} | {conc} | {each} "
          f"| {' / '.join(f'{s:.1f}' for s in r['alone'])} s | {r['asm']:.1f} s | {r['real']:.1f} s "
          f"| {r['model']:.1f} s ({' / '.join(f'{s:.1f}' for s in r['busy'])}) | {r['spread']:.2f} | {up} | {r['version']} |")
PY
[ -n "${R2E_KEEP:-}" ] && echo "kept $work" || true

#!/usr/bin/env bash
# Ablations share their common work: one build of three context variants (naive, full, sliced)
# next to three separate builds of the same settings, each from an empty cache, on the example
# repositories (built-in generator). Prints seconds, stage counts and the ratio.
# Usage: bash bench/variants.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
python3 - <<'PY'
import json, os, shutil, subprocess, tempfile, time

root = os.getcwd()
r2e = os.path.join(root, "target/release/r2e")
repos = "".join(f'[[repo]]\npath = "{root}/examples/{r}"\n' for r in ["textkit", "shapes_ds", "unitconv"])
strategies = ["naive", "full", "sliced"]

def build(text):
    work = tempfile.mkdtemp()
    with open(os.path.join(work, "pipeline.toml"), "w") as f:
        f.write(text)
    start = time.perf_counter()
    out = subprocess.run([r2e, "build", "--json"], cwd=work, capture_output=True, check=True)
    seconds = time.perf_counter() - start
    shutil.rmtree(work)
    return seconds, json.loads(out.stdout)

head = 'version = 1\n[project]\nname = "bench"\n' + repos
variants = "".join(f'[[variant]]\nname = "{s}"\ncontext.strategy = "{s}"\n' for s in strategies)
together, summary = build(head + variants)
separate = []
for s in strategies:
    seconds, single = build(head + f'[context]\nstrategy = "{s}"\n')
    separate.append(seconds)
print(f"one build, three variants : {together:7.1f} s")
for s, seconds in zip(strategies, separate):
    print(f"separate build, {s:<9}: {seconds:7.1f} s")
print(f"three separate builds     : {sum(separate):7.1f} s  ({sum(separate) / together:.2f}x the variant build)")
for name, v in summary["variants"].items():
    st = v["stages"]
    print(f"  {name:<7} executed: extract {st['extract']['executed']:>3}  slice {st['slice']['executed']:>3}  "
          f"generate {st['generate']['executed']:>3}  validate {st['validate']['executed']:>3}  "
          f"instances {v['counts']['instances']}")
PY

"""r2e's verifier inside an environment image: what a Harbor task's `tests/test.sh` runs (as
root, after the agent, with the task's `tests/` folder at TESTS), written by `r2e export
--format harbor`.

    python -I - TESTS < r2e_verify.py     (test.sh holds this script, HASHES filled in)

1. Every file it reads from TESTS/r2e must be the one exported (HASHES: name -> sha256). A
   missing or changed one scores 0.
2. `r2e-verdict prepare` makes the candidate module from the agent's file (only the instance's
   function is taken from it, as `r2e check` and `r2e serve` take it) and the runner's request.
3. The runner (`r2e_runner.py`, candidate mode) runs the harness on it as an unprivileged user
   (`nobody`), who cannot read the task (which holds the original module) or the verdict
   program; stopped after BACKSTOP times the harness's limit.
4. `r2e-verdict judge` gives the check path's verdict on that run against the reference's
   recorded calls.

It writes /logs/verifier/reward.txt (1: the candidate passes; 0: it fails or a file was not the
one exported), reward.json (numbers only, as Harbor reads it: `reward`, `tests`,
`tests_passed`) and r2e-verdict.json (the verdict: outcome, failing tests, why). When the
check itself cannot run (no interpreter, a verdict program that fails, the verifier not root),
it writes no reward and exits 1: Harbor then reports its own error (RewardFileNotFoundError),
not a score of 0.
"""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

HASHES = {}
LOGS = "/logs/verifier"
REPO = "/r2e/repo"
PROJECT = "/r2e/project"
NOBODY = 65534
BACKSTOP = 3
# The files only root may read while the candidate runs.
HELD = ("task.json", "r2e-verdict")


class CheckError(Exception):
    """The check could not run: no reward, an error."""


def remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def logs():
    """The verifier's log folder, root's own whatever the agent made of it."""
    if os.path.islink(LOGS) or (os.path.exists(LOGS) and not os.path.isdir(LOGS)):
        os.remove(LOGS)
    os.makedirs(LOGS, exist_ok=True)
    os.chown(LOGS, 0, 0)
    os.chmod(LOGS, 0o755)
    for name in ("reward.txt", "reward.json", "r2e-verdict.json"):
        remove(os.path.join(LOGS, name))


def score(passed, verdict, reward):
    """Writes the verdict and the reward files; reward.txt last."""
    logs()
    write(os.path.join(LOGS, "r2e-verdict.json"), json.dumps(verdict, indent=1) + "\n")
    write(os.path.join(LOGS, "reward.json"), json.dumps(reward) + "\n")
    write(os.path.join(LOGS, "reward.txt"), "1\n" if passed else "0\n")


def refused(why):
    """A verifier file that is not the one exported: 0."""
    verdict = {"outcome": "fail", "passed": False, "error": why, "tests": []}
    score(False, verdict, {"reward": 0, "tests": 0, "tests_passed": 0})


def judged(program, work, out, code):
    """The verdict program's answer (`out`, exit `code`) as the reward."""
    if code not in (0, 1):
        raise CheckError(f"the verdict program ended with {code}: {out.decode(errors='replace')}")
    path = os.path.join(work, "verdict.json")
    with open(path, "wb") as f:
        f.write(out)
    reward = subprocess.run([program, "reward", path], stdout=subprocess.PIPE, check=False)
    if reward.returncode != 0:
        raise CheckError("the verdict program could not score the verdict")
    score(code == 0, json.loads(out), json.loads(reward.stdout))


def drop():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def verify(tests):
    # The verifier's files (the original module among them) are root's alone from now on.
    os.chmod(tests, 0o700)
    work = tempfile.mkdtemp(prefix="r2e-verify-")
    # Root's folder, which `nobody` may pass through but not list; `held` only root reads.
    os.chmod(work, 0o711)
    held = os.path.join(work, "held")
    run = os.path.join(work, "run")
    os.mkdir(held, 0o700)
    os.mkdir(run, 0o755)
    os.chown(run, NOBODY, NOBODY)
    for name, digest in sorted(HASHES.items()):
        try:
            with open(os.path.join(tests, "r2e", name), "rb") as f:
                data = f.read()
        except OSError:
            return refused(f"the verifier's file `{name}` is missing")
        if hashlib.sha256(data).hexdigest() != digest:
            return refused(f"the verifier's file `{name}` is not the one exported")
        to = os.path.join(held if name in HELD else run, name)
        with open(to, "wb") as f:
            f.write(data)
        os.chmod(to, 0o700 if name in HELD else 0o644)
    program = os.path.join(held, "r2e-verdict")
    task = os.path.join(held, "task.json")
    with open(task, encoding="utf-8") as f:
        info = json.load(f)
    harness = os.path.join(run, "harness.py")
    prepared = subprocess.run(
        [program, "prepare", task, os.path.join(REPO, info["path"]), harness, run],
        stdout=subprocess.PIPE,
        check=False,
    )
    if prepared.returncode == 1:
        # The candidate cannot run at all (it does not compile, it lacks the function).
        return judged(program, work, prepared.stdout, 1)
    if prepared.returncode != 0:
        raise CheckError("the verdict program could not prepare the candidate")
    for name in ("candidate.py", "request.json"):
        os.chmod(os.path.join(run, name), 0o644)
    # The module's file is the candidate too, for code that imports it by its path or through
    # its package: nothing of the agent's file but the function.
    shutil.copyfile(os.path.join(run, "candidate.py"), os.path.join(REPO, info["path"]))
    env = {"PATH": "/usr/bin:/bin", "HOME": run, "LANG": "C.UTF-8", "TMPDIR": run}
    if os.path.isdir(PROJECT):
        env["R2E_PROJECT"] = PROJECT
    answer = os.path.join(run, "out.json")
    limit = int(info["timeout_seconds"])
    child = subprocess.Popen(
        [sys.executable, "-I", os.path.join(run, "r2e_runner.py"), os.path.join(run, "request.json"), answer],
        cwd=run,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=drop,
        start_new_session=True,
    )
    try:
        code = child.wait(timeout=BACKSTOP * limit)
    except subprocess.TimeoutExpired:
        code = None
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        pass
    child.wait()
    if code is None:
        run_args = ["--timed-out", str(limit)]
    elif code < 0:
        run_args = ["--died", f"killed by signal {-code}"]
    elif not os.path.exists(answer):
        run_args = ["--died", f"exited with {code} without an answer"]
    else:
        run_args = [answer]
    verdict = subprocess.run([program, "judge", task, *run_args], stdout=subprocess.PIPE, check=False)
    return judged(program, work, verdict.stdout, verdict.returncode)


def main():
    tests = sys.argv[1] if len(sys.argv) > 1 else "/tests"
    try:
        if os.geteuid() != 0:
            raise CheckError("the verifier runs as root, to keep the original module from the candidate")
        logs()
        verify(tests)
    except CheckError as e:
        print(f"r2e verifier: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

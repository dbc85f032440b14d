"""The slowest tests of a cargo-nextest JUnit file, with their times: `slowest.py JUNIT [N]`.

Prints the N (20) slowest test cases, slowest first, then the number of tests, how many did not
pass, and the sum of their times (the suite's wall time is shorter: tests run side by side).
"""

import sys
import xml.etree.ElementTree as ET


def main() -> None:
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        failed = any(c.tag in ("failure", "error") for c in case)
        binary = case.get("classname", "")
        cases.append((float(case.get("time", "0")), binary, case.get("name", ""), failed))
    cases.sort(key=lambda c: -c[0])
    print(f"the {min(n, len(cases))} slowest of {len(cases)} tests ({path}):")
    for time, binary, name, failed in cases[:n]:
        print(f"{time:9.1f} s  {binary} {name}{'  FAILED' if failed else ''}")
    bad = sum(1 for c in cases if c[3])
    total = sum(c[0] for c in cases)
    print(f"{len(cases)} tests, {bad} not passed, {total:.0f} s of test time in all")


if __name__ == "__main__":
    main()

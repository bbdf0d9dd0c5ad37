"""Turns `cargo test` output into a JUnit report and a reward.

usage: cargo_junit.py <cargo log> <cargo exit code> <verifier dir>

Writes <verifier dir>/junit.xml (one <testcase> per `test <name> ... ok|FAILED|ignored`
line, grouped by test binary) and <verifier dir>/reward.txt: 1 when cargo succeeded, no
test failed and the hidden tests (tests/akbench_hidden.rs) ran, else 0. A build failure
is one failing `cargo_build` testcase.
"""

import os
import re
import sys
import xml.etree.ElementTree as ET

HIDDEN = "akbench_hidden"
TEST_LINE = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored)\b")
RUNNING = re.compile(r"^\s*Running (?:unittests )?(\S+)")
DOCTESTS = re.compile(r"^\s*Doc-tests (\S+)")


def main():
    log_path, rc, out_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(log_path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()

    cases = []  # (suite, name, status)
    suite = "cargo"
    for line in lines:
        m = RUNNING.match(line)
        if m:
            suite = os.path.splitext(m.group(1))[0].replace("/", ".")
            continue
        m = DOCTESTS.match(line)
        if m:
            suite = "doctests." + m.group(1)
            continue
        m = TEST_LINE.match(line)
        if m:
            cases.append((suite, m.group(1), m.group(2)))

    # Failure details: cargo prints "---- <name> stdout ----" blocks.
    details = {}
    current = None
    for line in lines:
        m = re.match(r"^---- (.+?) stdout ----$", line)
        if m:
            current = m.group(1)
            details[current] = []
        elif current is not None:
            if line.startswith("failures:") or line.startswith("test result:"):
                current = None
            else:
                details[current].append(line)

    if not cases:
        tail = "\n".join(lines[-60:])
        cases = [("cargo", "cargo_build", "FAILED")]
        details["cargo_build"] = ["cargo test exited %d with no test results" % rc, tail]

    failed = sum(1 for c in cases if c[2] == "FAILED")
    skipped = sum(1 for c in cases if c[2] == "ignored")
    hidden_ran = any(HIDDEN in c[0] and c[2] == "ok" for c in cases)
    reward = 1 if rc == 0 and failed == 0 and hidden_ran else 0

    root = ET.Element("testsuites", name="cargo test", tests=str(len(cases)),
                      failures=str(failed), skipped=str(skipped))
    by_suite = {}
    for s, name, status in cases:
        by_suite.setdefault(s, []).append((name, status))
    for s, items in by_suite.items():
        ts = ET.SubElement(root, "testsuite", name=s, tests=str(len(items)),
                           failures=str(sum(1 for _, st in items if st == "FAILED")),
                           skipped=str(sum(1 for _, st in items if st == "ignored")))
        for name, status in items:
            tc = ET.SubElement(ts, "testcase", classname=s, name=name)
            if status == "FAILED":
                msg = "\n".join(details.get(name, []))
                ET.SubElement(tc, "failure", message="test failed").text = msg
            elif status == "ignored":
                ET.SubElement(tc, "skipped")
    ET.ElementTree(root).write(os.path.join(out_dir, "junit.xml"),
                               encoding="utf-8", xml_declaration=True)
    with open(os.path.join(out_dir, "reward.txt"), "w") as f:
        f.write("%d\n" % reward)
    print("junit: %d tests, %d failed, hidden tests ran: %s" % (len(cases), failed, hidden_ran))


if __name__ == "__main__":
    main()

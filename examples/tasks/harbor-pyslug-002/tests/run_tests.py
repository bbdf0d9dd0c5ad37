"""Runs the workspace's unittest suite plus the hidden tests; writes junit.xml and reward.txt.

cwd is the workspace. The hidden tests are $AKBENCH_TESTS_DIR/test_hidden.py; results go
to $AKBENCH_VERIFIER_DIR. Reward 1 when every test passed and the hidden tests ran.
A workspace whose code or tests no longer import counts as failing tests (reward 0), not
as a broken evaluation.
"""

import importlib.util
import os
import sys
import time
import traceback
import unittest
import xml.etree.ElementTree as ET

WORKSPACE = os.getcwd()
TESTS_DIR = os.environ["AKBENCH_TESTS_DIR"]
OUT_DIR = os.environ["AKBENCH_VERIFIER_DIR"]
HIDDEN = "akbench_hidden"


class ImportFailure(unittest.TestCase):
    """Stands for a test module that could not be imported."""

    def __init__(self, name, error):
        super().__init__("runTest")
        self._name = name
        self._error = error

    def id(self):
        return "%s.import" % self._name

    def runTest(self):
        self.fail("cannot import %s:\n%s" % (self._name, self._error))


class Recorder(unittest.TextTestResult):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.records = []  # (test id, status, seconds, message)
        self._t0 = None

    def startTest(self, test):
        self._t0 = time.monotonic()
        super().startTest(test)

    def _rec(self, test, status, message=""):
        dt = time.monotonic() - (self._t0 or time.monotonic())
        self.records.append((test.id(), status, dt, message))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._rec(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._rec(test, "failure", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        if isinstance(test, unittest.TestCase):
            self._rec(test, "error", self._exc_info_to_string(err, test))
        else:  # setUpModule / setUpClass failures arrive as _ErrorHolder
            self.records.append((str(test), "error", 0.0, self._exc_info_to_string(err, test)))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._rec(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._rec(test, "passed")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._rec(test, "failure", "unexpected success")


def load_hidden():
    path = os.path.join(TESTS_DIR, "test_hidden.py")
    try:
        spec = importlib.util.spec_from_file_location(HIDDEN, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[HIDDEN] = module
        spec.loader.exec_module(module)
    except Exception:
        return unittest.TestSuite([ImportFailure(HIDDEN, traceback.format_exc())])
    return unittest.defaultTestLoader.loadTestsFromModule(module)


def main():
    sys.path.insert(0, WORKSPACE)
    suite = unittest.TestSuite()
    if os.path.isdir(os.path.join(WORKSPACE, "tests")):
        # Failed imports of repository test modules become failing _FailedTest cases.
        suite.addTests(unittest.defaultTestLoader.discover("tests", top_level_dir=WORKSPACE))
    suite.addTests(load_hidden())
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=2, resultclass=Recorder)
    result = runner.run(suite)

    records = result.records
    failed = sum(1 for r in records if r[1] in ("failure", "error"))
    hidden_ran = any(r[0].startswith(HIDDEN + ".") and r[1] == "passed" for r in records)
    reward = 1 if result.wasSuccessful() and failed == 0 and hidden_ran else 0

    root = ET.Element("testsuites", name="unittest", tests=str(len(records)),
                      failures=str(sum(1 for r in records if r[1] == "failure")),
                      errors=str(sum(1 for r in records if r[1] == "error")))
    by_suite = {}
    for rid, status, dt, msg in records:
        classname, _, name = rid.rpartition(".")
        by_suite.setdefault(classname or "unittest", []).append((classname, name or rid, status, dt, msg))
    for sname, items in by_suite.items():
        ts = ET.SubElement(root, "testsuite", name=sname, tests=str(len(items)),
                           failures=str(sum(1 for i in items if i[2] == "failure")),
                           errors=str(sum(1 for i in items if i[2] == "error")),
                           skipped=str(sum(1 for i in items if i[2] == "skipped")))
        for classname, name, status, dt, msg in items:
            tc = ET.SubElement(ts, "testcase", classname=classname, name=name, time="%.3f" % dt)
            if status in ("failure", "error"):
                ET.SubElement(tc, status, message=(msg.strip().splitlines() or [status])[-1]).text = msg
            elif status == "skipped":
                ET.SubElement(tc, "skipped", message=msg)
    ET.ElementTree(root).write(os.path.join(OUT_DIR, "junit.xml"),
                               encoding="utf-8", xml_declaration=True)
    with open(os.path.join(OUT_DIR, "reward.txt"), "w") as f:
        f.write("%d\n" % reward)
    print("junit: %d tests, %d failed, hidden tests ran: %s; reward %d"
          % (len(records), failed, hidden_ran, reward))
    return 0


if __name__ == "__main__":
    sys.exit(main())

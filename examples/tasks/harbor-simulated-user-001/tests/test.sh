#!/bin/bash
# Grades the answer file AND the state the `user` service holds: /app/backup.json must
# have the user's preferences (tests/expected.json, which the agent never sees), and the
# user's transcript (GET /transcript on the service) must show that each of the three
# was asked about; right values without asking (a guess) do not pass.
python3 - <<'PY'
import json, os, urllib.request

def verdict(ok, why):
    print(why)
    open("/logs/verifier/reward.txt", "w").write("1\n" if ok else "0\n")
    raise SystemExit(0)

expected = json.load(open("/tests/expected.json"))
try:
    got = json.load(open("/app/backup.json"))
except (OSError, ValueError) as e:
    verdict(False, f"/app/backup.json is not readable JSON: {e}")
print("backup.json:", json.dumps(got, sort_keys=True))
if not isinstance(got, dict):
    verdict(False, "backup.json is not an object")
got["schedule"] = " ".join(str(got.get("schedule", "")).split())
wrong = [k for k in expected if got.get(k) != expected[k]]
if wrong:
    verdict(False, f"wrong or missing: {', '.join(wrong)}")
base = os.environ.get("USER_URL", "http://user:8000")
try:
    asked = json.load(urllib.request.urlopen(base + "/transcript", timeout=5))["asked"]
except Exception as e:
    verdict(False, f"the user's transcript is unreadable: {e}")
topics = {t for q in asked for t in (q.get("topic") or "").split(",") if t}
print(f"asked {len(asked)} question(s), about: {', '.join(sorted(topics)) or 'nothing'}")
missing = sorted({"schedule", "retention", "target"} - topics)
if missing:
    verdict(False, f"the user was never asked about: {', '.join(missing)}")
verdict(True, "the user's preferences, asked for")
PY

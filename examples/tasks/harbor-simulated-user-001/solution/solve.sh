#!/bin/bash
# The reference solution: an MCP client (python3's standard library) over SSE, as the
# task's `mcp_servers` entry says: it asks the user each preference through `ask_user`,
# reads the values out of the answers, and writes /app/backup.json.
set -euo pipefail
python3 - <<'PY'
import http.client, json, os, re, urllib.parse

URL = urllib.parse.urlsplit(os.environ.get("USER_MCP_URL", "http://user:8000/sse"))
stream = http.client.HTTPConnection(URL.hostname, URL.port or 80, timeout=30)
stream.request("GET", URL.path, headers={"Accept": "text/event-stream"})
events = stream.getresponse()
assert events.status == 200, events.status

def next_event():
    name, data = None, []
    while True:
        line = events.readline().decode().rstrip("\r\n")
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and data:
            return name, "\n".join(data)

kind, endpoint = next_event()
assert kind == "endpoint", kind
counter = iter(range(1, 1000))

def rpc(method, params=None, notify=False):
    msg = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if not notify:
        msg["id"] = next(counter)
    post = http.client.HTTPConnection(URL.hostname, URL.port or 80, timeout=30)
    post.request("POST", endpoint, body=json.dumps(msg), headers={"Content-Type": "application/json"})
    r = post.getresponse()
    r.read()
    assert r.status == 202, r.status
    if notify:
        return None
    while True:
        kind, data = next_event()
        reply = json.loads(data)
        if kind == "message" and reply.get("id") == msg["id"]:
            if "error" in reply:
                raise SystemExit(f"{method}: {reply['error']}")
            return reply["result"]

rpc("initialize", {"protocolVersion": "2024-11-05", "capabilities": {},
                   "clientInfo": {"name": "solve.sh", "version": "1"}})
rpc("notifications/initialized", notify=True)

def ask(question):
    result = rpc("tools/call", {"name": "ask_user", "arguments": {"question": question}})
    answer = result["content"][0]["text"]
    print(f"Q: {question}\nA: {answer}")
    return answer

hh, mm = re.search(r"(\d{1,2}):(\d{2})", ask("When should the backup run?")).groups()
days = re.search(r"(\d+) days?", ask("How many days of backups should be kept?")).group(1)
target = re.search(r"(/[\w./-]*\w)", ask("Which folder should the backups go to?")).group(1)
config = {"schedule": f"{int(mm)} {int(hh)} * * *", "retention_days": int(days), "target": target}
open("/app/backup.json", "w").write(json.dumps(config, indent=2) + "\n")
print(json.dumps(config))
PY

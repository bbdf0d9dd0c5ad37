#!/bin/bash
# The reference solution: an MCP client (python3's standard library) that asks the
# `warehouse` server over streamable HTTP for each part's bin and writes /app/bins.txt.
set -euo pipefail
python3 - <<'PY'
import json, os, urllib.request

URL = os.environ.get("WAREHOUSE_MCP_URL", "http://warehouse:8000/mcp")
session = {}
counter = iter(range(1, 1000))

def rpc(method, params=None, notify=False):
    msg = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if not notify:
        msg["id"] = next(counter)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    headers.update(session)
    req = urllib.request.Request(URL, data=json.dumps(msg).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        if r.headers.get("Mcp-Session-Id"):
            session["Mcp-Session-Id"] = r.headers["Mcp-Session-Id"]
        body = r.read()
    if notify:
        return None
    reply = json.loads(body)
    if "error" in reply:
        raise SystemExit(f"{method}: {reply['error']}")
    return reply["result"]

rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "solve.sh", "version": "1"}})
rpc("notifications/initialized", notify=True)
tools = [t["name"] for t in rpc("tools/list")["tools"]]
assert "get_part" in tools, tools
lines = []
for sku in ["HX-2201", "GS-0450", "BR-7716"]:
    result = rpc("tools/call", {"name": "get_part", "arguments": {"sku": sku}})
    part = json.loads(result["content"][0]["text"])
    lines.append(f"{sku} {part['bin']}")
open("/app/bins.txt", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY

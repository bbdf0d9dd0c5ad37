#!/usr/bin/env python3
"""A minimal OTLP/gRPC trace receiver: the compose stack's stand-in for the OpenTelemetry
Collector (which has no Debian package; see deploy/README.md).

It accepts `opentelemetry.proto.collector.trace.v1.TraceService/Export` on --grpc-listen
(default 0.0.0.0:4317), answers every request with an empty (successful) response, reads
each span's trace id, name and its resource's `service.name` from the protobuf wire format,
and serves on --http-listen (default 0.0.0.0:8889):

  GET /metrics  Prometheus text: otlp_sink_spans_received_total{service,span},
                otlp_sink_traces_received_total{service}, otlp_sink_export_requests_total
  GET /spans    the last --keep spans as JSON lines (service, name, trace_id)

Bounded: at most 1,000 (service, span) series (later names count as span="other"), and
per service the last --keep-trace-ids trace ids (default 100,000) to count distinct traces.
SIGTERM and SIGINT stop it at once (exit 0). It stores nothing else and forwards nothing: point OTEL_EXPORTER_OTLP_ENDPOINT at a real
collector or trace backend in production (deploy/observability/otel-collector.yaml).
Needs python3-grpcio (Debian package).
"""
import argparse
import collections
import http.server
import json
import signal
import threading
from concurrent import futures

import grpc

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def fields(buf):
    """Yields (field number, wire type, value) of one protobuf message; value is an int for
    varints and fixed widths, bytes for length-delimited fields."""
    i, n = 0, len(buf)
    while i < n:
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif wt == 2:
            ln, i = varint(buf, i)
            v, i = buf[i:i + ln], i + ln
        elif wt == 5:
            v, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        else:
            raise ValueError(f"unsupported wire type {wt}")
        yield num, wt, v


def varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def service_name(resource):
    # Resource.attributes (1) -> KeyValue{key 1, value 2: AnyValue{string_value 1}}
    for num, _, kv in fields(resource):
        if num != 1:
            continue
        key, value = "", ""
        for n, _, v in fields(kv):
            if n == 1:
                key = v.decode()
            elif n == 2:
                for an, _, av in fields(v):
                    if an == 1:
                        value = av.decode()
        if key == "service.name":
            return value
    return ""


def spans(request):
    """(service, span name, trace id hex) of every span of an ExportTraceServiceRequest."""
    for num, _, rs in fields(request):
        if num != 1:  # resource_spans
            continue
        service = ""
        scope_spans = []
        for n, _, v in fields(rs):
            if n == 1:
                service = service_name(v)
            elif n == 2:
                scope_spans.append(v)
        for ss in scope_spans:
            for n, _, span in fields(ss):
                if n != 2:  # ScopeSpans.spans
                    continue
                trace_id, name = b"", ""
                for sn, _, sv in fields(span):
                    if sn == 1:
                        trace_id = sv
                    elif sn == 5:
                        name = sv.decode()
                yield service, name, trace_id.hex()


class Store:
    """What the sink keeps, all of it bounded: the last `keep` spans, at most `max_series`
    (service, span name) counters (later names are counted under span="other"), and per
    service the last `keep_trace_ids` trace ids (a trace id is counted once while it is
    among them, so the count is exact for traces whose spans arrive within that window)."""

    def __init__(self, keep, keep_trace_ids=100000, max_series=1000):
        self.lock = threading.Lock()
        self.spans = collections.Counter()
        self.max_series = max_series
        self.trace_counts = collections.Counter()
        self.seen = collections.defaultdict(collections.OrderedDict)
        self.keep_trace_ids = keep_trace_ids
        self.requests = 0
        self.recent = collections.deque(maxlen=keep)

    def add(self, request):
        got = list(spans(request))
        with self.lock:
            self.requests += 1
            for service, name, trace_id in got:
                key = (service, name)
                if key not in self.spans and len(self.spans) >= self.max_series:
                    key = (service, "other")
                self.spans[key] += 1
                seen = self.seen[service]
                if trace_id in seen:
                    seen.move_to_end(trace_id)
                else:
                    seen[trace_id] = None
                    self.trace_counts[service] += 1
                    if len(seen) > self.keep_trace_ids:
                        seen.popitem(last=False)
                self.recent.append({"service": service, "name": name, "trace_id": trace_id})

    def metrics(self):
        esc = lambda s: s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        with self.lock:
            out = [
                "# HELP otlp_sink_export_requests_total OTLP trace export requests received.",
                "# TYPE otlp_sink_export_requests_total counter",
                f"otlp_sink_export_requests_total {self.requests}",
                "# HELP otlp_sink_spans_received_total Spans received, by service and span name.",
                "# TYPE otlp_sink_spans_received_total counter",
            ]
            for (service, name), count in sorted(self.spans.items()):
                out.append(
                    f'otlp_sink_spans_received_total{{service="{esc(service)}",span="{esc(name)}"}} {count}'
                )
            out += [
                "# HELP otlp_sink_traces_received_total Distinct trace ids received, by service.",
                "# TYPE otlp_sink_traces_received_total counter",
            ]
            for service, count in sorted(self.trace_counts.items()):
                out.append(f'otlp_sink_traces_received_total{{service="{esc(service)}"}} {count}')
            return "\n".join(out) + "\n"

    def recent_lines(self):
        with self.lock:
            return "".join(json.dumps(s) + "\n" for s in self.recent)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grpc-listen", default="0.0.0.0:4317")
    ap.add_argument("--http-listen", default="0.0.0.0:8889")
    ap.add_argument("--keep", type=int, default=10000)
    ap.add_argument("--keep-trace-ids", type=int, default=100000)
    args = ap.parse_args()
    store = Store(args.keep, args.keep_trace_ids)

    def export(request, _context):
        store.add(request)
        return b""  # an empty ExportTraceServiceResponse: everything accepted

    handler = grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {"Export": grpc.unary_unary_rpc_method_handler(export)},
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(args.grpc_listen)
    server.start()

    class Http(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/metrics":
                body, kind = store.metrics(), "text/plain; version=0.0.4"
            elif self.path == "/spans":
                body, kind = store.recent_lines(), "application/x-ndjson"
            else:
                self.send_error(404)
                return
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_):
            pass

    host, port = args.http_listen.rsplit(":", 1)
    httpd = http.server.ThreadingHTTPServer((host, int(port)), Http)
    print(f"otlp-sink: OTLP/gRPC on {args.grpc_listen}, metrics on http://{args.http_listen}/metrics", flush=True)

    # SIGTERM (docker stop) and SIGINT end it at once: both servers stop, the process exits 0.
    def stop(signum, _frame):
        print(f"otlp-sink: signal {signum}, stopping", flush=True)
        server.stop(0)
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    httpd.serve_forever()
    httpd.server_close()


if __name__ == "__main__":
    main()

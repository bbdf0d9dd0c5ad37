//! With export on, JSON log lines carry the current span's trace and span ids (the same ids
//! its `traceparent` names); export goes to a port nothing listens on (nothing is sent
//! before shutdown).

#[test]
fn json_log_lines_carry_trace_and_span_ids() {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", unused.local_addr().unwrap());
    drop(unused);
    std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
    let capture = akbench_telemetry::Capture::default();
    let telemetry = akbench_telemetry::init(akbench_telemetry::Logs {
        service_name: "akbench-test",
        json: true,
        filter: tracing_subscriber::EnvFilter::new("info"),
        ansi: false,
        stderr: true,
        capture: Some(capture.clone()),
    });
    assert!(telemetry.exporting());
    assert!(akbench_telemetry::enabled());
    let span = tracing::info_span!("work", akbench.run.id = "r");
    let traceparent = akbench_telemetry::traceparent(&span);
    span.in_scope(|| tracing::info!(answer = 42, "inside"));
    tracing::info!("outside");
    let text = String::from_utf8(capture.lock().unwrap().clone()).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let inside = lines
        .iter()
        .find(|l| l["fields"]["message"] == "inside")
        .unwrap_or_else(|| panic!("{text}"));
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    assert_eq!(inside["trace_id"], parts[1], "{text}");
    assert_eq!(inside["span_id"], parts[2], "{text}");
    assert_eq!(inside["fields"]["answer"], 42);
    let outside = lines
        .iter()
        .find(|l| l["fields"]["message"] == "outside")
        .unwrap();
    assert!(
        outside.get("trace_id").is_none(),
        "no span, no ids: {outside}"
    );
    // A child continuing a remote parent keeps the parent's trace id.
    let child = tracing::info_span!(parent: None, "remote child");
    akbench_telemetry::set_parent(&child, &traceparent);
    let continued = akbench_telemetry::traceparent(&child);
    assert_eq!(continued.split('-').nth(1), Some(parts[1]));
    assert_ne!(continued.split('-').nth(2), Some(parts[2]));
    drop((span, child));
    telemetry.pause(true);
    assert!(!akbench_telemetry::enabled());
    assert_eq!(
        akbench_telemetry::traceparent(&tracing::info_span!("paused")),
        ""
    );
}

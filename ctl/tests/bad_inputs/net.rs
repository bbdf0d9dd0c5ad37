//! Network bad inputs against the real `akbench` binary: a coordinator that accepts the
//! connection and then says nothing (plain HTTP/2 or TLS) is given up on at the call's
//! deadline (`--rpc-timeout`, configured short here), exit 3, with a message naming the
//! coordinator and what to check (docs/limits.md, "Deadlines").

use super::{akbench, argv};
use std::net::TcpListener;

/// A listener that accepts every connection and holds it, silent, until the test ends.
fn silent_coordinator() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in l.incoming().flatten() {
            held.push(c);
        }
    });
    addr
}

#[test]
fn a_silent_coordinator_is_given_up_on_at_the_calls_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let addr = silent_coordinator();
    for (url, doing) in [
        (format!("http://{addr}"), "waiting for an answer"),
        (format!("https://{addr}"), "connecting"),
    ] {
        for command in [&["run", "list"][..], &["run", "status", "some-run"][..]] {
            let mut args = argv(&["--coordinator", &url, "--rpc-timeout", "0.5"]);
            args.extend(argv(command));
            let (code, out) = akbench(&args, dir.path());
            assert_eq!(code, Some(3), "{url} {command:?}: {out}");
            assert!(
                out.contains(&format!(
                    "the coordinator at {url} did not answer within 0.5 s while {doing}"
                )) && out.contains("/healthz")
                    && out.contains("--rpc-timeout"),
                "{url} {command:?}: {out}"
            );
        }
    }
    // The deadline's own range is the flag's: refused at parse, naming it.
    let (code, out) = akbench(
        &argv(&[
            "--coordinator",
            &format!("http://{addr}"),
            "--rpc-timeout",
            "0",
            "run",
            "list",
        ]),
        dir.path(),
    );
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("--rpc-timeout"), "{out}");
}

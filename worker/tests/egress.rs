//! The egress proxy with real components: an upstream host in a network namespace this test
//! creates, serving HTTPS (a certificate from a CA made here) and plain HTTP with
//! Python's `http.server`; the "worker" (this test's thread, and every thread the runtime
//! starts from it) in a second namespace linked to it by a veth pair, so nothing of the
//! machine's own network changes; a sandboxed `sh` running `curl` through the proxy.
//!
//! Checked: a public phase reaches the host by name over HTTPS and HTTP and every
//! connection is recorded with its bytes and (plain HTTP) status; an allowlist reaches only
//! the listed name (the other is refused and recorded `denied`); `no-network` gets no proxy
//! and reaches nothing; the worker's own loopback and an unopened private range are never
//! reached, whatever the mode; loopback inside the sandbox keeps working.
//!
//! The last test runs every other test again with the worker as an unprivileged user (the
//! Kubernetes worker's case: the namespace is made in a user namespace of its own,
//! `net_user.rs`), against the upstream host this process made.
//!
//! Needs root, `ip` (iproute2), `/usr/bin/python3`, `curl` and a working sandbox;
//! otherwise it prints why it skipped.

mod common;

use akbench_core::egress::{AllowedHost, NetworkMode, Outcome};
use akbench_worker::process::CancelToken;
use akbench_worker::runtime::egress::{PROXY_ADDR, PROXY_PORT};
use common::upstream::{contact, fetch_all, line, ready, run_in, sandboxed};
use std::time::Duration;

#[test]
fn a_public_phase_reaches_hosts_by_name_and_every_contact_is_recorded() {
    let Some(u) = ready("a_public_phase_reaches_hosts_by_name_and_every_contact_is_recorded")
    else {
        return;
    };
    let urls = [
        "https://up.test:8443/file",
        "https://other.test:8443/file",
        "http://up.test:8080/file",
        "http://up.test:8080/fail",
        "http://sneaky.test:8080/file",
        "http://self.test:8080/file",
    ];
    // Loopback inside the sandbox stays direct (no_proxy) and works.
    let script = format!(
        "echo \"proxy=$https_proxy no=$no_proxy\"\n\
         /usr/bin/python3 -m http.server --bind 127.0.0.1 8000 >/dev/null 2>&1 &\n\
         for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:8000/ && break; sleep 0.1; done\n\
         {}\
         {}",
        fetch_all(&urls),
        fetch_all(&["http://127.0.0.1:8000/"]),
    );
    let (out, cs) = sandboxed(&u, Some(u.policy(NetworkMode::Public)), &script);
    assert!(
        out.contains(&format!(
            "proxy=http://{PROXY_ADDR}:{PROXY_PORT} no=localhost,127.0.0.1,::1"
        )),
        "{out}"
    );
    assert_eq!(line(&out, urls[0]), format!("{} 0 200 200", urls[0]));
    assert_eq!(line(&out, urls[1]), format!("{} 0 200 200", urls[1]));
    assert_eq!(line(&out, urls[2]), format!("{} 0 200 000", urls[2]));
    assert_eq!(line(&out, urls[3]), format!("{} 0 503 000", urls[3]));
    // A name that resolves to the worker's own loopback is refused by the proxy.
    assert_eq!(line(&out, urls[4]), format!("{} 0 403 000", urls[4]));
    // So is the worker's own address (a service on 0.0.0.0 there would answer).
    assert_eq!(line(&out, urls[5]), format!("{} 0 403 000", urls[5]));
    assert_eq!(
        line(&out, "http://127.0.0.1:8000/"),
        "http://127.0.0.1:8000/ 0 200 000"
    );
    let tls = contact(&cs, "up.test", 8443, Outcome::Allowed);
    assert_eq!(tls.connections, 1, "{cs:#?}");
    assert!(tls.bytes_down > 100_000 && tls.bytes_up > 0, "{tls:?}");
    assert!(tls.http_statuses.is_empty(), "{tls:?}");
    contact(&cs, "other.test", 8443, Outcome::Allowed);
    let plain = contact(&cs, "up.test", 8080, Outcome::Allowed);
    assert_eq!(plain.connections, 2, "{plain:?}");
    assert_eq!(plain.http_statuses, [200, 503]);
    assert!(plain.bytes_down > 100_000, "{plain:?}");
    let sneaky = contact(&cs, "sneaky.test", 8080, Outcome::Denied);
    assert!(
        sneaky.detail.as_deref().unwrap_or("").contains("loopback"),
        "{sneaky:?}"
    );
    let own = contact(&cs, "self.test", 8080, Outcome::Denied);
    assert!(
        own.detail
            .as_deref()
            .unwrap_or("")
            .contains("the worker's own addresses"),
        "{own:?}"
    );
    // The sandbox's own loopback never goes through the proxy.
    assert!(!cs.iter().any(|c| c.host == "127.0.0.1"), "{cs:#?}");
    // The run's grade would be infrastructure_error without a passing reward: a 5xx.
    let cause = akbench_core::egress::grading_fetch_failure(&cs, false).unwrap();
    assert!(
        cause.contains("up.test:8080") && cause.contains("HTTP 503"),
        "{cause}"
    );
}

#[test]
fn an_allowlist_reaches_only_its_hosts_and_records_the_others_as_denied() {
    let Some(u) = ready("an_allowlist_reaches_only_its_hosts_and_records_the_others_as_denied")
    else {
        return;
    };
    let urls = [
        "https://up.test:8443/file",
        "https://other.test:8443/file",
        "http://other.test:8080/file",
    ];
    let mode = NetworkMode::Allowlist(vec![AllowedHost::parse("up.test").unwrap()]);
    let (out, cs) = sandboxed(&u, Some(u.policy(mode)), &fetch_all(&urls));
    assert_eq!(line(&out, urls[0]), format!("{} 0 200 200", urls[0]));
    // curl: 56 = the proxy answered CONNECT with an error (403).
    assert_eq!(line(&out, urls[1]), format!("{} 56 000 403", urls[1]));
    assert_eq!(line(&out, urls[2]), format!("{} 0 403 000", urls[2]));
    let ok = contact(&cs, "up.test", 8443, Outcome::Allowed);
    assert!(ok.bytes_down > 100_000, "{ok:?}");
    let denied = contact(&cs, "other.test", 8443, Outcome::Denied);
    assert_eq!((denied.bytes_up, denied.bytes_down), (0, 0));
    assert!(
        denied
            .detail
            .as_deref()
            .unwrap_or("")
            .contains("allowed_hosts"),
        "{denied:?}"
    );
    contact(&cs, "other.test", 8080, Outcome::Denied);
    assert!(!cs
        .iter()
        .any(|c| c.host == "other.test" && c.outcome == Outcome::Allowed));
    // Denied hosts are the task's declaration, not an infrastructure fault.
    assert_eq!(
        akbench_core::egress::grading_fetch_failure(&cs, false),
        None
    );
}

#[test]
fn no_network_gets_no_proxy_and_reaches_nothing() {
    let Some(u) = ready("no_network_gets_no_proxy_and_reaches_nothing") else {
        return;
    };
    let script = format!(
        "echo \"proxy=${{https_proxy:-none}}\"\n{}\
         c=$(curl -sS -x http://{PROXY_ADDR}:{PROXY_PORT} --cacert \"$CA\" -o /dev/null -w '%{{http_code}} %{{http_connect}}' https://up.test:8443/file 2>/dev/null); echo \"explicit $? $c\"\n",
        fetch_all(&["https://up.test:8443/file", "http://10.215.0.2:8080/file"])
    );
    for policy in [
        None,
        Some(u.policy(NetworkMode::NoNetwork)),
        Some(u.policy(NetworkMode::Allowlist(Vec::new()))),
    ] {
        let (out, cs) = sandboxed(&u, policy.clone(), &script);
        assert!(out.contains("proxy=none"), "{policy:?}: {out}");
        // 6: could not resolve; 7: could not connect.
        assert_eq!(
            line(&out, "https://up.test:8443/file"),
            "https://up.test:8443/file 6 000 000",
            "{policy:?}"
        );
        assert_eq!(
            line(&out, "http://10.215.0.2:8080/file"),
            "http://10.215.0.2:8080/file 7 000 000",
            "{policy:?}"
        );
        assert_eq!(line(&out, "explicit"), "explicit 7 000 000", "{policy:?}");
        assert!(cs.is_empty(), "{cs:#?}");
    }
}

#[test]
fn the_worker_never_reaches_a_private_range_it_did_not_open() {
    let Some(u) = ready("the_worker_never_reaches_a_private_range_it_did_not_open") else {
        return;
    };
    let mut policy = u.policy(NetworkMode::Public);
    policy.open_ranges.clear();
    let urls = ["https://up.test:8443/file"];
    let (out, cs) = sandboxed(&u, Some(policy), &fetch_all(&urls));
    assert_eq!(line(&out, urls[0]), format!("{} 56 000 403", urls[0]));
    let d = contact(&cs, "up.test", 8443, Outcome::Denied);
    assert!(
        d.detail
            .as_deref()
            .unwrap_or("")
            .contains("private network"),
        "{d:?}"
    );
}

/// Every other test of this file again, with the worker process as an unprivileged user
/// (common::unprivileged), in the worker namespace this process made.
#[test]
fn the_egress_tests_hold_with_an_unprivileged_worker() {
    const THIS: &str = "the_egress_tests_hold_with_an_unprivileged_worker";
    if common::unprivileged::is_child() {
        return;
    }
    let Some(_u) = ready(THIS) else {
        return;
    };
    common::unprivileged::rerun_suite(
        THIS,
        &["a_container_reaches_only_its_allowlist_through_the_proxy"],
    );
}

/// The same proxy under the `container` runtime: Python's `urllib` in the Debian test image
/// (`scripts/build-test-image`, pushed to a loopback registry) reads `https_proxy` and
/// reaches the listed host over HTTPS, not the other.
#[test]
fn a_container_reaches_only_its_allowlist_through_the_proxy() {
    const THIS: &str = "a_container_reaches_only_its_allowlist_through_the_proxy";
    if let Some(why) = common::registry::missing() {
        akbench_core::testkit::skip(THIS, &why);
        return;
    }
    // The registry and the pull on this namespace's loopback, before entering the worker's.
    let base = common::registry::unpacked_base("egress");
    let image = base.image.clone();
    let Some(u) = ready(THIS) else {
        return;
    };
    let script = r#"python3 -c '
import os, ssl, urllib.request
ctx = ssl.create_default_context(cafile=os.environ["CA"])
for u in ["https://up.test:8443/file", "https://other.test:8443/file"]:
    try:
        r = urllib.request.urlopen(u, context=ctx, timeout=60)
        print(u, r.status, len(r.read()))
    except OSError as e:
        print(u, "error", e)
'"#;
    let mode = NetworkMode::Allowlist(vec![AllowedHost::parse("up.test").unwrap()]);
    let (out, cs) = run_in(&u, Some(u.policy(mode)), script, Some(&image));
    assert!(
        out.contains("https://up.test:8443/file 200 100000"),
        "{out}"
    );
    let other = line(&out, "https://other.test:8443/file");
    assert!(other.contains("error") && other.contains("403"), "{out}");
    let ok = contact(&cs, "up.test", 8443, Outcome::Allowed);
    assert!(ok.bytes_down > 100_000, "{ok:?}");
    contact(&cs, "other.test", 8443, Outcome::Denied);
}

/// A tunnel with no byte either way for the idle limit is closed by the proxy (the upstream
/// server would wait for a request forever).
#[test]
fn an_idle_tunnel_is_closed_by_the_proxy() {
    let Some(u) = ready("an_idle_tunnel_is_closed_by_the_proxy") else {
        return;
    };
    let mut policy = u.policy(NetworkMode::Public);
    policy.limits.idle = Duration::from_secs(1);
    let script = format!(
        "/usr/bin/python3 -c '
import socket
s = socket.create_connection((\"{PROXY_ADDR}\", {PROXY_PORT}))
s.sendall(b\"CONNECT up.test:8080 HTTP/1.1\\r\\n\\r\\n\")
head = b\"\"
while b\"\\r\\n\\r\\n\" not in head:
    head += s.recv(1)
print(head.split(b\"\\r\\n\")[0].decode())
print(\"then\", len(s.recv(100)), \"bytes\")
'"
    );
    let (out, cs) = sandboxed(&u, Some(policy), &script);
    assert_eq!(out, "HTTP/1.1 200 Connection established\nthen 0 bytes\n");
    let c = contact(&cs, "up.test", 8080, Outcome::Allowed);
    assert_eq!((c.bytes_up, c.bytes_down), (0, 0), "{c:?}");
}

/// Grading with the task's network (`[environment] network_mode = "public"`): a test script
/// that downloads from the upstream host grades the reference solution solved, the grade
/// recording the host; the same script fetching from a closed port of a host the operator
/// vouches for (`AKBENCH_EGRESS_KNOWN_HOSTS`: core::egress::vouch) ends the attempt
/// `infrastructure_error` naming the fetch, never a verdict on the agent.
#[test]
fn a_grader_whose_download_fails_ends_infrastructure_error() {
    use akbench_core::lifecycle::State;
    const THIS: &str = "a_grader_whose_download_fails_ends_infrastructure_error";
    let Some(u) = ready(THIS) else {
        return;
    };
    std::env::set_var(
        akbench_core::egress::settings::OPEN_RANGES_ENV,
        "10.215.0.0/16",
    );
    std::env::set_var(
        akbench_core::egress::settings::HOSTS_ENV,
        format!("up.test={}", u.addr),
    );
    // The closed port is a known upstream of this worker: its failure is the
    // infrastructure's (an unvouched one leaves the verdict: worker/tests/grading_fetch.rs).
    std::env::set_var(
        akbench_core::egress::vouch::KNOWN_HOSTS_ENV,
        "default,up.test:9",
    );
    let c = common::corpus();
    for (id, port, solved) in [("fetch-ok", 8443, Some(true)), ("fetch-fails", 9, None)] {
        let script = format!(
            "{}if curl -sSf --cacert \"$T/ca.pem\" -o /dev/null https://up.test:{port}/file; then\n{}else\n  echo 0 > \"$V/reward.txt\"\nfi\n",
            common::SCRIPT_HEAD,
            common::QUIET_UNITTEST
        );
        c.add_task(
            id,
            &c.commit,
            &script,
            "[environment]\nnetwork_mode = \"public\"\n",
        );
        let dir = c.tasks().join(id);
        std::fs::write(dir.join("tests/test_answer.py"), common::UNITTEST_ANSWER).unwrap();
        std::fs::copy(u.ca(), dir.join("tests/ca.pem")).unwrap();
        let t = c.task(id);
        let a = c.agent("oracle");
        let req = c.request(&t, &a, id);
        let r = c
            .orchestrator()
            .run_trial(
                &req,
                &akbench_core::dispatch::Backoff::NONE,
                &akbench_worker::orchestrator::Silent,
                &CancelToken::new(),
            )
            .unwrap()
            .record;
        let at = &r.attempts[0];
        let line = format!(
            "{id}: state={} ok={:?} cause={:?}",
            r.outcome.state, r.outcome.ok, at.cause
        );
        eprintln!("{line}");
        match solved {
            Some(ok) => {
                assert_eq!(r.outcome.state, State::Completed, "{line}");
                assert_eq!(r.outcome.ok, Some(ok), "{line}");
                let g = at.grade.as_ref().unwrap();
                let rt = g.runtime.as_ref().unwrap();
                let up = contact(&rt.egress, "up.test", 8443, Outcome::Allowed);
                assert!(up.bytes_down > 100_000, "{up:?}");
            }
            None => {
                assert_eq!(r.outcome.state, State::InfrastructureError, "{line}");
                let cause = at.cause.as_deref().unwrap_or_default();
                assert!(
                    cause.contains("the grader's fetch of up.test failed")
                        && cause.contains("connect_failed"),
                    "{line}"
                );
                assert!(at.grade.is_none(), "{line}");
            }
        }
    }
}

//! The egress proxy's TLS interception and cache with real components: the test upstream
//! host ([`common::upstream`]) serving uv's installer and release tarball under their real
//! names ([`common::installers`]), the proxy verifying it against its CA
//! (`AKBENCH_EGRESS_UPSTREAM_CA`'s role), a sandboxed grader-like script trusting only the
//! worker's CA (the policy's trust, no `--cacert`).
//!
//! Checked: the first run fetches the tarball from the host and stores it, the second
//! (another sandbox, the same worker cache) gets it from the cache with no upstream byte,
//! each request recorded with its URL and cache use; a plain-HTTP `pool/` file is cached
//! too; what is not cacheable is fetched every time; an allowlist without the host gets
//! nothing from the cache (the phase's network decides first); a filled cache serves a
//! worker whose upstream is unreachable, and a second orchestrator sharing the folder
//! grades a task with no byte from upstream; with interception off, HTTPS is a tunnel
//! again; a host the proxy cannot verify is a failed fetch.
//!
//! Needs root, `ip`, `/usr/bin/python3`, `curl`, a sandbox and PyPI (to build uv's tarball).

mod common;

use akbench_core::egress::{AllowedHost, CacheUse, Contact, NetworkMode, Outcome};
use akbench_worker::runtime::egress::intercept::Interception;
use akbench_worker::runtime::egress::store::Store;
use akbench_worker::runtime::egress::Policy;
use common::installers::{install_url, serve_uv, tarball_url, UV_VERSION};
use common::upstream::{contact, ready, sandboxed, Upstream};

fn intercepting(u: &Upstream, mode: NetworkMode, cache: &std::path::Path) -> Policy {
    let mut p = u.policy(mode);
    let ca = std::fs::read_to_string(u.ca()).unwrap();
    p.intercept = Some(Interception::new(Some((&ca, "test CA"))).unwrap());
    p.cache = Some(Store::open(cache, 1 << 30).unwrap());
    p
}

fn upstream_bytes(cs: &[Contact]) -> u64 {
    cs.iter().map(Contact::upstream_bytes).sum()
}

/// The grader's fetches: uv's installer (which downloads the tarball), a Debian pool file
/// over plain HTTP, and a page that is not cacheable.
fn grader() -> String {
    format!(
        "set -e\ncurl -LsSf {} | sh\n. \"$HOME/.local/bin/env\"\nuv --version\n\
         curl -sSf -o /dev/null http://up.test/debian/pool/main/c/curl/curl_1_amd64.deb\n\
         curl -sSf -o /dev/null https://up.test/simple/pytest/\necho done\n",
        install_url(UV_VERSION)
    )
}

#[test]
fn the_second_run_gets_immutable_downloads_from_the_cache() {
    const THIS: &str = "the_second_run_gets_immutable_downloads_from_the_cache";
    common::installers::uv_tarball(UV_VERSION).unwrap();
    let Some(u) = ready(THIS) else {
        return;
    };
    serve_uv(&u, UV_VERSION).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let (out1, first) = sandboxed(
        &u,
        Some(intercepting(&u, NetworkMode::Public, cache.path())),
        &grader(),
    );
    assert!(
        out1.contains(&format!("uv {UV_VERSION}")) && out1.ends_with("done\n"),
        "{out1}"
    );
    let gh = contact(&first, "github.com", 443, Outcome::Allowed);
    assert!(
        gh.bytes_down > 10_000_000 && gh.bytes_from_cache == 0,
        "{gh:?}"
    );
    assert_eq!(gh.requests.len(), 1, "{gh:?}");
    assert_eq!(gh.requests[0].url, tarball_url(UV_VERSION));
    assert_eq!(gh.requests[0].cache, CacheUse::Stored);
    assert_eq!(gh.http_statuses, [200]);
    let (out2, second) = sandboxed(
        &u,
        Some(intercepting(&u, NetworkMode::Public, cache.path())),
        &grader(),
    );
    assert!(out2.contains(&format!("uv {UV_VERSION}")), "{out2}");
    let gh2 = contact(&second, "github.com", 443, Outcome::Allowed);
    assert_eq!(gh2.requests[0].cache, CacheUse::Hit, "{gh2:?}");
    assert_eq!(gh2.upstream_bytes(), 0, "{gh2:?}");
    let astral = contact(&second, "astral.sh", 443, Outcome::Allowed);
    assert_eq!(astral.requests[0].cache, CacheUse::Hit, "{astral:?}");
    let pool = contact(&second, "up.test", 80, Outcome::Allowed);
    assert_eq!(pool.requests[0].cache, CacheUse::Hit, "{pool:?}");
    // Not immutable by its URL: fetched from the host every time.
    let index = contact(&second, "up.test", 443, Outcome::Allowed);
    assert_eq!(index.requests[0].cache, CacheUse::Bypass, "{index:?}");
    assert!(index.upstream_bytes() >= 100_000, "{index:?}");
    let (a, b) = (upstream_bytes(&first), upstream_bytes(&second));
    eprintln!("upstream bytes: first run {a}, second run {b}");
    assert!(b * 10 <= a, "second {b} > 10% of first {a}");

    // An allowlist without github.com gets nothing, cached or not.
    let only_up = NetworkMode::Allowlist(vec![AllowedHost::parse("astral.sh").unwrap()]);
    let script = format!(
        "curl -sS -o /dev/null -w '%{{http_code}} %{{http_connect}}' {} 2>/dev/null; echo \" $?\"\n",
        tarball_url(UV_VERSION)
    );
    let (out, cs) = sandboxed(&u, Some(intercepting(&u, only_up, cache.path())), &script);
    assert_eq!(out.trim(), "000 403 56", "{out}");
    let denied = contact(&cs, "github.com", 443, Outcome::Denied);
    assert_eq!(
        (denied.bytes_down, denied.bytes_from_cache),
        (0, 0),
        "{denied:?}"
    );

    // Interception off: a tunnel, the host's own certificate (the test CA), nothing cached.
    let mut off = u.policy(NetworkMode::Public);
    off.cache = Some(Store::open(cache.path(), 1 << 30).unwrap());
    let script = format!(
        "curl -sSf --cacert \"$CA\" -o /dev/null {}; echo \"tunnel $?\"\n",
        tarball_url(UV_VERSION)
    );
    let (out, cs) = sandboxed(&u, Some(off), &script);
    assert_eq!(out.trim(), "tunnel 0", "{out}");
    let t = contact(&cs, "github.com", 443, Outcome::Allowed);
    assert!(
        t.requests.is_empty() && t.bytes_from_cache == 0 && t.bytes_down > 10_000_000,
        "{t:?}"
    );
}

#[test]
fn a_filled_cache_serves_a_worker_whose_upstream_is_unreachable() {
    const THIS: &str = "a_filled_cache_serves_a_worker_whose_upstream_is_unreachable";
    common::installers::uv_tarball(UV_VERSION).unwrap();
    let Some(u) = ready(THIS) else {
        return;
    };
    serve_uv(&u, UV_VERSION).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let script = format!(
        "set -e\ncurl -LsSf {} | sh\n. \"$HOME/.local/bin/env\"\nuv --version\n",
        install_url(UV_VERSION)
    );
    let (out, _) = sandboxed(
        &u,
        Some(intercepting(&u, NetworkMode::Public, cache.path())),
        &script,
    );
    assert!(out.contains(&format!("uv {UV_VERSION}")), "{out}");
    // Another worker sharing the cache folder, whose names lead nowhere (no route, nothing
    // listening): everything the grader needs comes from the cache.
    let mut offline = intercepting(&u, NetworkMode::Public, cache.path());
    for (_, ip) in offline.hosts.iter_mut() {
        *ip = "10.215.251.9".parse().unwrap();
    }
    let (out, cs) = sandboxed(&u, Some(offline.clone()), &script);
    assert!(out.contains(&format!("uv {UV_VERSION}")), "{out}");
    assert_eq!(upstream_bytes(&cs), 0, "{cs:#?}");
    // What is not in the cache fails as a fetch (the grader's infrastructure error).
    let (out, cs) = sandboxed(
        &u,
        Some(offline),
        "curl -sS -o /dev/null -w '%{http_code}' --max-time 60 https://astral.sh/uv/0.0.1/install.sh 2>/dev/null; echo \" $?\"\n",
    );
    assert!(out.starts_with("50"), "{out}");
    let failed = cs.iter().find(|c| c.host == "astral.sh").unwrap();
    assert!(failed.failed_fetch(), "{failed:?}");
}

/// Cluster with no internet: a task whose grader installs uv (`curl -LsSf
/// https://astral.sh/uv/0.9.7/install.sh | sh`) is graded by a first worker that reaches
/// the host, then by a second worker (another orchestrator, the same cache folder, as a
/// shared volume) whose upstream names lead nowhere: solved both times, the second with no
/// byte from upstream.
#[test]
fn a_second_worker_with_no_upstream_grades_a_task_from_a_filled_cache() {
    use akbench_core::egress::settings::{HOSTS_ENV, OPEN_RANGES_ENV};
    use akbench_core::lifecycle::State;
    use akbench_worker::process::CancelToken;
    const THIS: &str = "a_second_worker_with_no_upstream_grades_a_task_from_a_filled_cache";
    common::installers::uv_tarball(UV_VERSION).unwrap();
    let Some(u) = ready(THIS) else {
        return;
    };
    serve_uv(&u, UV_VERSION).unwrap();
    let cache = tempfile::tempdir().unwrap();
    std::env::set_var(OPEN_RANGES_ENV, "10.215.0.0/16");
    std::env::set_var(HOSTS_ENV, u.hosts_env());
    std::env::set_var("AKBENCH_EGRESS_UPSTREAM_CA", u.ca());
    std::env::set_var("AKBENCH_EGRESS_CACHE_DIR", cache.path());
    let c = common::corpus();
    let script = format!(
        "{}if curl -LsSf {} | sh >/dev/null && . \"$HOME/.local/bin/env\" && uv --version; then\n{}else\n  echo 0 > \"$V/reward.txt\"\nfi\n",
        common::SCRIPT_HEAD,
        install_url(UV_VERSION),
        common::QUIET_UNITTEST
    );
    c.add_task(
        "needs-uv",
        &c.commit,
        &script,
        "[environment]\nnetwork_mode = \"public\"\n",
    );
    std::fs::write(
        c.tasks().join("needs-uv/tests/test_answer.py"),
        common::UNITTEST_ANSWER,
    )
    .unwrap();
    let t = c.task("needs-uv");
    let a = c.agent("oracle");
    for (worker, offline) in [("first", false), ("second", true)] {
        if offline {
            let nowhere: Vec<String> = common::upstream::NAMES
                .iter()
                .map(|n| format!("{n}=10.215.251.9"))
                .collect();
            std::env::set_var(HOSTS_ENV, nowhere.join(","));
        }
        let req = c.request(&t, &a, worker);
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
            "{worker}: state={} ok={:?} cause={:?}",
            r.outcome.state, r.outcome.ok, at.cause
        );
        assert_eq!(r.outcome.state, State::Completed, "{line}");
        assert_eq!(r.outcome.ok, Some(true), "{line}");
        let egress = &at.grade.as_ref().unwrap().runtime.as_ref().unwrap().egress;
        let gh = egress
            .iter()
            .find(|c| c.host == "github.com")
            .unwrap_or_else(|| panic!("{line}: {egress:#?}"));
        let want = if offline {
            CacheUse::Hit
        } else {
            CacheUse::Stored
        };
        assert_eq!(gh.requests[0].cache, want, "{line}: {gh:?}");
        if offline {
            assert_eq!(upstream_bytes(egress), 0, "{line}: {egress:#?}");
        }
    }
}

/// Interception verifies the host: without its CA among the proxy's roots, the request
/// fails as a fetch (502 to the client, `connect_failed` naming the certificate), never a
/// silently trusted host.
#[test]
fn an_upstream_the_proxy_cannot_verify_is_a_failed_fetch() {
    let Some(u) = ready("an_upstream_the_proxy_cannot_verify_is_a_failed_fetch") else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let mut p = intercepting(&u, NetworkMode::Public, cache.path());
    p.intercept = Some(Interception::new(None).unwrap());
    let (out, cs) = sandboxed(
        &u,
        Some(p),
        "curl -sS -o /dev/null -w '%{http_code}' https://up.test/file 2>/dev/null; echo \" $?\"\n",
    );
    assert_eq!(out.trim(), "502 0", "{out}");
    let c = contact(&cs, "up.test", 443, Outcome::ConnectFailed);
    assert!(c.failed_fetch(), "{c:?}");
    assert!(
        c.detail.as_deref().unwrap_or("").contains("certificate"),
        "{c:?}"
    );
}

//! Sandbox trust ([`akbench_worker::runtime::trust`]) with real components: the test
//! upstream host ([`common::upstream`]) serving uv's installer and release tarball under
//! their real names ([`common::installers`]), its CA given to the worker as
//! `AKBENCH_SANDBOX_EXTRA_CA` would give it (the policy's `extra_ca`).
//!
//! Checked: in the `sandbox` runtime a grader's `curl -LsSf https://astral.sh/uv/.../install.sh
//! | sh` installs uv with no `--cacert` anywhere, `curl` and Python reading the merged bundle
//! (and the variables naming it); without the extra CA the same fetch fails on the
//! certificate (so the first check can fail). In the `container` runtime, over the Debian
//! test image (no `ca-certificates` package), Python trusts the host by the bundle written in
//! the attempt's writable root, and the anchor for `update-ca-certificates` is there.
//!
//! Needs root, `ip`, `/usr/bin/python3`, `curl`, a sandbox and PyPI (to build uv's tarball);
//! the container test also the registry tools ([`common::registry::missing`]).

mod common;

use akbench_core::egress::{NetworkMode, Outcome};
use akbench_worker::runtime::trust::{Extra, ANCHOR, BUNDLE};
use common::installers::{install_url, serve_uv, UV_VERSION};
use common::upstream::{contact, ready, run_in, sandboxed, Upstream};

fn extra(u: &Upstream) -> Extra {
    Extra::parse(&std::fs::read_to_string(u.ca()).unwrap(), "test CA").unwrap()
}

#[test]
fn a_sandbox_trusts_the_extra_ca_and_a_grader_installs_uv_from_the_test_host() {
    const THIS: &str = "a_sandbox_trusts_the_extra_ca_and_a_grader_installs_uv_from_the_test_host";
    // Built (from PyPI) before entering the worker's namespace, which reaches only the
    // test host.
    common::installers::uv_tarball(UV_VERSION).unwrap();
    let Some(u) = ready(THIS) else {
        return;
    };
    serve_uv(&u, UV_VERSION).unwrap();
    let script = format!(
        "set -e\necho \"cert=$SSL_CERT_FILE pip=$PIP_CERT node=$NODE_EXTRA_CA_CERTS\"\n\
         curl -LsSf {} | sh\n. \"$HOME/.local/bin/env\"\nuv --version\nuvx --version\n\
         /usr/bin/python3 -c 'import urllib.request; print(\"python\", urllib.request.urlopen(\"https://up.test:8443/f\").status)'\n",
        install_url(UV_VERSION)
    );
    let mut policy = u.policy(NetworkMode::Public);
    policy.extra_ca = Some(extra(&u));
    let (out, cs) = sandboxed(&u, Some(policy), &script);
    assert!(
        out.contains(&format!("cert={BUNDLE} pip={BUNDLE} node={BUNDLE}")),
        "{out}"
    );
    assert!(out.contains(&format!("uv {UV_VERSION}")), "{out}");
    assert!(out.contains("python 200"), "{out}");
    contact(&cs, "astral.sh", 443, Outcome::Allowed);
    let gh = contact(&cs, "github.com", 443, Outcome::Allowed);
    assert!(gh.bytes_down > 10_000_000, "{gh:?}");

    // Without the extra CA: the same fetch fails on the certificate (curl exit 60).
    let script = format!(
        "curl -sSf -o /dev/null {} 2>/dev/null; echo \"curl $?\"\n",
        install_url(UV_VERSION)
    );
    let (out, _) = sandboxed(&u, Some(u.policy(NetworkMode::Public)), &script);
    assert_eq!(out.trim(), "curl 60", "{out}");
}

#[test]
fn a_container_trusts_the_extra_ca_through_its_bundle_and_keeps_the_anchor() {
    const THIS: &str = "a_container_trusts_the_extra_ca_through_its_bundle_and_keeps_the_anchor";
    if let Some(why) = common::registry::missing() {
        akbench_core::testkit::skip(THIS, &why);
        return;
    }
    let base = common::registry::unpacked_base("trust");
    let image = base.image.clone();
    let Some(u) = ready(THIS) else {
        return;
    };
    let script = format!(
        r#"python3 -c '
import urllib.request
r = urllib.request.urlopen("https://up.test:8443/f", timeout=60)
body = r.read()
print("status", r.status, "bytes", len(body))
'
head -c 27 {ANCHOR}; echo
grep -c "BEGIN CERTIFICATE" {BUNDLE}
"#
    );
    let mut policy = u.policy(NetworkMode::Public);
    policy.extra_ca = Some(extra(&u));
    let (out, cs) = run_in(&u, Some(policy), &script, Some(&image));
    assert!(out.contains("status 200"), "{out}");
    assert!(out.contains("-----BEGIN CERTIFICATE-----"), "{out}");
    let ok = contact(&cs, "up.test", 8443, Outcome::Allowed);
    assert!(ok.bytes_down > 100_000, "{ok:?}");
    // The image's own files are unchanged: the bundle is in this attempt's upper folder.
    assert!(!base
        .image
        .rootfs
        .join(ANCHOR.trim_start_matches('/'))
        .exists());
}

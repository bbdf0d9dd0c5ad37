//! The cache's goal, measured (issue 45): a Terminal-Bench 2.1-shaped grader run twice in
//! the `container` runtime over the Debian test image, each run a fresh container and a
//! fresh home (as two trials), sharing one worker cache. The grader does what TB2.1's
//! `tests/test.sh` does: `apt-get update && apt-get install -y curl` (Debian's real mirror,
//! plain HTTP), `curl -LsSf https://astral.sh/uv/0.9.7/install.sh | sh` (the test upstream
//! host, [`common::installers`], then the uv tarball from "github.com"), `source
//! $HOME/.local/bin/env`, `uvx -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf ...`
//! (PyPI, real, over HTTPS through the proxy's interception).
//!
//! Asserted on bytes, never time: the second run's upstream bytes (bytes the proxy did not
//! serve from its cache) are at most 10% of the first's. Both figures are printed
//! (`upstream bytes: ...`; docs/PERFORMANCE.md records them).
//!
//! Needs root, `ip`, the registry tools ([`common::registry::missing`]), Debian's mirror and
//! PyPI reachable from this machine.

mod common;

use akbench_core::egress::{AllowedHost, Contact, NetworkMode};
use akbench_worker::runtime::egress::intercept::Interception;
use akbench_worker::runtime::egress::store::Store;
use akbench_worker::runtime::egress::Policy;
use common::installers::{install_url, serve_uv, UV_VERSION};
use common::upstream::{run_in, Upstream};

const TEST_OUTPUTS: &str = "def test_the_answer():\n    assert 6 * 7 == 42\n";

fn grader() -> String {
    format!(
        r#"set -e
apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null
curl -LsSf {} | sh >/dev/null
. "$HOME/.local/bin/env"
mkdir -p "$HOME/tests" "$HOME/logs"
printf '%s' '{TEST_OUTPUTS}' > "$HOME/tests/test_outputs.py"
uvx -q -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf "$HOME/logs/ctrf.json" "$HOME/tests/test_outputs.py" -rA
echo graded
"#,
        install_url(UV_VERSION)
    )
}

fn upstream_bytes(cs: &[Contact]) -> u64 {
    cs.iter().map(Contact::upstream_bytes).sum()
}

#[test]
fn a_second_trial_downloads_at_most_a_tenth_of_the_first() {
    const THIS: &str = "a_second_trial_downloads_at_most_a_tenth_of_the_first";
    if let Some(why) = common::registry::missing() {
        akbench_core::testkit::skip(THIS, &why);
        return;
    }
    common::installers::uv_tarball(UV_VERSION).unwrap();
    let base = common::registry::unpacked_base("measure");
    let image = base.image.clone();
    let u = Upstream::create_on_host().unwrap();
    serve_uv(&u, UV_VERSION).unwrap();
    let ca = std::fs::read_to_string(u.ca()).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let policy = || {
        let mut p = Policy::new(NetworkMode::Public);
        p.open_ranges = vec![AllowedHost::parse("10.215.0.0/16").unwrap()];
        // Only the installer's hosts are the test host; Debian and PyPI are the real ones.
        p.hosts = vec![("astral.sh".into(), u.addr), ("github.com".into(), u.addr)];
        p.intercept = Some(Interception::new(Some((&ca, "test CA"))).unwrap());
        p.cache = Some(Store::open(cache.path(), 1 << 30).unwrap());
        p
    };
    let mut figures = Vec::new();
    for trial in 1..=2 {
        let (out, cs) = run_in(&u, Some(policy()), &grader(), Some(&image));
        assert!(
            out.contains("1 passed") && out.ends_with("graded\n"),
            "{out}"
        );
        let up = upstream_bytes(&cs);
        let total: u64 = cs.iter().map(|c| c.bytes_down).sum();
        for c in &cs {
            eprintln!(
                "trial {trial}: {}:{} {:?} down={} from_cache={} requests={}",
                c.host,
                c.port,
                c.outcome,
                c.bytes_down,
                c.bytes_from_cache,
                c.requests.len()
            );
        }
        eprintln!("trial {trial}: upstream bytes {up} of {total} received");
        figures.push(up);
    }
    let (first, second) = (figures[0], figures[1]);
    eprintln!(
        "upstream bytes: first trial {first}, second trial {second} ({:.1}%)",
        second as f64 * 100.0 / first as f64
    );
    assert!(
        first > 10_000_000,
        "the first trial fetched only {first} bytes"
    );
    assert!(
        second * 10 <= first,
        "the second trial's upstream bytes {second} are over 10% of the first's {first}"
    );
}

//! What the suite reruns share ([`super::unprivileged`], [`super::in_container`]): the tests
//! of the running test binary to run again, and the verdict over their children's output.

/// The tests of the running test binary but `this` and `also_skip`, one name each.
pub fn listed(this: &str, also_skip: &[&str]) -> Vec<String> {
    let listed = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--list", "--format", "terse"])
        .output()
        .unwrap();
    let tests: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .filter(|t| *t != this && !also_skip.contains(t))
        .map(str::to_string)
        .collect();
    assert!(!tests.is_empty(), "no tests listed by {listed:?}");
    tests
}

/// Prints the children's output `text`, fails naming `failed`, and skips `this` (saying
/// which) when a child skipped a test; `under` says how the children ran.
pub fn conclude(this: &str, under: &str, text: &str, failed: &[String]) {
    eprintln!("{text}");
    assert!(failed.is_empty(), "{under}, these tests failed: {failed:?}");
    let skipped: Vec<&str> = text.lines().filter(|l| l.starts_with("SKIPPED ")).collect();
    if !skipped.is_empty() {
        akbench_core::testkit::skip(
            this,
            &format!("{under}, tests skipped: {}", skipped.join("; ")),
        );
    }
}

//! A fake CLI agent for the ctl tests: the real `claude-code` / `codex` adapter with a
//! `program` that prints an event stream captured from the real CLI
//! (core/tests/fixtures/agents). Shared by the tests that need it (`mod fake_cli;`).

use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A descriptor `<agents>/<name>.toml` whose program prints `fixture` and exits 0.
pub fn fake_agent(agents: &Path, name: &str, adapter: &str, fixture: &str) {
    use std::os::unix::fs::PermissionsExt;
    let src = repo().join("core/tests/fixtures/agents").join(fixture);
    let script = agents.join(format!("{name}.sh"));
    // The transcript is inside the script: the sandbox exposes the program, not the repository.
    let transcript = std::fs::read_to_string(&src).unwrap();
    std::fs::write(
        &script,
        format!("#!/bin/sh\ncat <<'AKBENCH_TRANSCRIPT'\n{transcript}\nAKBENCH_TRANSCRIPT\n"),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        agents.join(format!("{name}.toml")),
        format!(
            "adapter = \"{adapter}\"\nprogram = \"{}\"\n",
            script.display()
        ),
    )
    .unwrap();
}

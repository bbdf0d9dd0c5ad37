//! `akbench agent list` and `akbench agent install`: the agents akbench installs itself
//! (`akbench_core::agent::install::KNOWN`), and this host's agent cache
//! (`akbench_worker::agents`, docs/agents.md).

use crate::exit::InputError;
use akbench_core::agent::install;
use akbench_worker::agents;

/// `akbench agent list [--json]`: one row per known agent, installed or not (and where).
pub fn list(args: crate::cli::AgentListArgs) -> anyhow::Result<i32> {
    let root = agents::cache_root();
    let rows = agents::list(&root);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(crate::exit::OK);
    }
    outln!("agent cache: {}", root.display());
    outln!(
        "{:<16} {:<5} {:<28} {:<10} {:<9} installed",
        "AGENT",
        "FROM",
        "PACKAGE",
        "VERSION",
        "PROGRAM"
    );
    for r in rows {
        let version = if r.pinned {
            r.version.clone()
        } else {
            format!("{} (not pinned)", r.version)
        };
        let installed = match (&r.installed, &r.runtime) {
            (Some(dir), Some(rt)) => format!("yes ({rt}) {}", dir.display()),
            (Some(dir), None) => format!("yes {}", dir.display()),
            _ => "no".to_string(),
        };
        outln!(
            "{:<16} {:<5} {:<28} {:<10} {:<9} {installed}",
            r.adapter,
            r.ecosystem.as_str(),
            r.package,
            version,
            r.program
        );
    }
    Ok(crate::exit::OK)
}

/// `akbench agent install NAME [--version V]`: installs into the agent cache (once).
pub fn install(args: crate::cli::AgentInstallArgs) -> anyhow::Result<i32> {
    let spec = install::InstallSpec {
        package: None,
        version: args.version.clone(),
    };
    let what = install::resolve(&args.name, &spec).map_err(|e| {
        InputError(format!(
            "failed to install agent `{}`: {e}",
            akbench_core::limits::elide(&args.name)
        ))
    })?;
    let root = agents::cache_root();
    let done = agents::install(&root, &what).map_err(anyhow::Error::msg)?;
    outln!("{}", done.program.display());
    eprintln!(
        "akbench: {} {}@{} installed in {} ({})",
        what.ecosystem.as_str(),
        what.package,
        what.version,
        done.dir.display(),
        done.marker.runtime
    );
    Ok(crate::exit::OK)
}

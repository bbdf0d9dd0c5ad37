//! `akbench certs`: a development CA, a coordinator server certificate and worker client
//! certificates (PEM), for compose files and local clusters. An existing CA in the folder is
//! reused, so more workers can be added later; an existing server or worker file is never
//! overwritten. Not a production PKI: the CA key sits next to the certificates.

use std::path::{Path, PathBuf};

use akbench_coordinator::devcerts::{Ca, Pem, Validity};
use akbench_core::bounded_read::{Links, ReadKind};
use akbench_core::output::{Existing, Mode};

use crate::cli::CertsArgs;
use crate::exit::InputError;

fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// Writes the files and prints their paths.
pub fn run(args: CertsArgs) -> anyhow::Result<i32> {
    if args.server_names.is_empty() && args.workers.is_empty() && args.worker_pools.is_empty() {
        return Err(InputError(
            "failed to make certificates: nothing asked for; fix: pass --server-name NAME \
             (repeatable: DNS names or IP addresses of the coordinator) and/or --worker NAME \
             and/or --worker-pool PREFIX"
                .into(),
        )
        .into());
    }
    // The flag's parser checked --days (akbench_core::ranges::CERT_DAYS; again here for
    // callers that build the arguments by hand); each --server-name is checked here, where
    // a long one is named cut short.
    akbench_core::ranges::CERT_DAYS
        .whole(args.days)
        .map_err(|e| InputError(format!("failed to make certificates: --days: {e}")))?;
    for name in &args.server_names {
        akbench_core::ranges::server_name(name)
            .map_err(|e| InputError(format!("failed to make certificates: --server-name: {e}")))?;
    }
    for w in &args.workers {
        if !safe_name(w) {
            return Err(InputError(format!(
                "failed to make a certificate for worker {w:?}: names are 1-64 letters, \
                 digits, '.', '-' or '_'; fix: pick such a --worker name"
            ))
            .into());
        }
    }
    for p in &args.worker_pools {
        if !p.is_empty() && !safe_name(p) {
            return Err(InputError(format!(
                "failed to make a pool certificate for prefix {p:?}: a prefix is empty or \
                 1-64 letters, digits, '.', '-' or '_'; fix: pick such a --worker-pool PREFIX"
            ))
            .into());
        }
    }
    // (file stem, certificate name) of every worker certificate asked for.
    let worker_certs: Vec<(String, String)> = args
        .workers
        .iter()
        .map(|w| (format!("worker-{w}"), w.clone()))
        .chain(args.worker_pools.iter().map(|p| {
            let stem = if p.is_empty() {
                "worker-pool".to_string()
            } else {
                format!("worker-pool-{p}")
            };
            (stem, format!("{}{p}", akbench_core::identity::POOL_PREFIX))
        }))
        .collect();
    let out = &args.out;
    let ca_cert = out.join("ca.pem");
    let ca_key = out.join("ca.key");
    let reuse = ca_cert.exists() || ca_key.exists();
    let mut planned: Vec<PathBuf> = Vec::new();
    if !args.server_names.is_empty() {
        planned.extend([out.join("server.pem"), out.join("server.key")]);
    }
    for (stem, _) in &worker_certs {
        planned.extend([
            out.join(format!("{stem}.pem")),
            out.join(format!("{stem}.key")),
        ]);
    }
    // Check everything before writing anything.
    if let Some(existing) = planned.iter().find(|p| p.exists()) {
        return Err(InputError(format!(
            "failed to make certificates: {} already exists; fix: remove it or pick another --out",
            existing.display()
        ))
        .into());
    }
    let validity = Validity::days(args.days);
    let ca = if reuse {
        let read = |p: &Path| {
            ReadKind::Certificate.read_text(p, Links::Follow).map_err(|e| {
                InputError(format!(
                    "failed to read the CA {}: it {e}; fix: keep ca.pem and ca.key together in --out, or use an empty folder",
                    p.display()
                ))
            })
        };
        Ca::from_pem(&read(&ca_cert)?, &read(&ca_key)?).map_err(|e| {
            InputError(format!(
                "failed to load the CA in {}: {e}; fix: use an empty --out folder",
                out.display()
            ))
        })?
    } else {
        Ca::new("akbench development CA", Validity::days(args.days.max(365)))?
    };
    let mut files: Vec<(PathBuf, String, bool)> = Vec::new();
    if !reuse {
        files.push((ca_cert.clone(), ca.pem().cert.clone(), false));
        files.push((ca_key.clone(), ca.pem().key.clone(), true));
    }
    let mut add = |stem: &str, pem: Pem| {
        files.push((out.join(format!("{stem}.pem")), pem.cert, false));
        files.push((out.join(format!("{stem}.key")), pem.key, true));
    };
    if !args.server_names.is_empty() {
        add("server", ca.server(&args.server_names, validity)?);
    }
    for (stem, name) in &worker_certs {
        add(stem, ca.worker(name, validity)?);
    }
    std::fs::create_dir_all(out)
        .map_err(|e| anyhow::anyhow!("failed to create {}: {e}", out.display()))?;
    for (path, text, secret) in &files {
        write(path, text, *secret)?;
        outln!("{}", path.display());
    }
    if reuse {
        eprintln!(
            "akbench certs: signed with the existing CA {}",
            ca_cert.display()
        );
    }
    Ok(crate::exit::OK)
}

fn write(path: &Path, text: &str, secret: bool) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mode = if secret { Mode::Private } else { Mode::Public };
    akbench_core::output::write_with(path, mode, Existing::Refuse, |w| {
        w.write_all(text.as_bytes())
    })?;
    Ok(())
}

//! The embedded cluster's password: a generated secret kept `0600` in the data folder
//! ([`SECRET_FILE`]), the `scram-sha-256` methods `initdb` is given, and the migration of a
//! data folder an older version initialised with `trust` (the secret is set in single-user
//! mode, then `pg_hba.conf`'s `trust` methods become `scram-sha-256`).

use super::{check, io_err, ClusterError, PrivateCluster, SUPERUSER};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The file in the data folder holding the superuser's password (mode 0600).
pub const SECRET_FILE: &str = "akbench.secret";

/// The authentication method of every local and loopback connection.
pub const AUTH_METHOD: &str = "scram-sha-256";

/// The path of the secret file of the cluster in `data_dir`.
pub fn secret_path(data_dir: &Path) -> PathBuf {
    data_dir.join(SECRET_FILE)
}

/// 32 random bytes from the kernel, hex-encoded (URL-safe, no quoting needed in SQL).
pub(super) fn generate() -> Result<String, ClusterError> {
    let mut bytes = [0u8; 32];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(io_err("read /dev/urandom for the PostgreSQL password"))?;
    Ok(hex::encode(bytes))
}

/// Writes `secret` to `path`, readable by this process's user only (0600).
pub(super) fn write_private(path: &Path, secret: &str) -> Result<(), ClusterError> {
    let action = format!("write {}", path.display());
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io_err(action.clone()))?;
    // An existing file keeps its mode on open: tighten it.
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
        .map_err(io_err(format!("restrict {}", path.display())))?;
    file.write_all(secret.as_bytes()).map_err(io_err(action))
}

/// The secret stored in `data_dir`, if the cluster has one.
pub(super) fn read(data_dir: &Path) -> Result<Option<String>, ClusterError> {
    let path = secret_path(data_dir);
    match fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(format!("read {}", path.display()))(e)),
    }
}

/// `pg_hba.conf` with every `trust` method replaced by [`AUTH_METHOD`] (comments and other
/// methods unchanged).
pub fn hba_without_trust(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let code = line.split('#').next().unwrap_or_default();
        let fields: Vec<&str> = code.split_whitespace().collect();
        let rewritten = match fields.first() {
            Some(kind) if kind.starts_with("host") || *kind == "local" => {
                // The method follows the address (host*) or the user (local).
                let method_at = if *kind == "local" { 3 } else { 4 };
                match fields.get(method_at) {
                    Some(&"trust") => {
                        let mut f: Vec<&str> = fields.clone();
                        f[method_at] = AUTH_METHOD;
                        Some(f.join(" "))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        out.push(rewritten.unwrap_or_else(|| line.to_string()));
    }
    out.join("\n") + "\n"
}

impl PrivateCluster {
    /// Writes `secret` into a private temporary file the cluster's account can read and runs
    /// `f` with its path (for `initdb --pwfile`); the file is removed afterwards.
    pub(super) fn with_pwfile<T>(
        &self,
        secret: &str,
        f: impl FnOnce(&Path) -> Result<T, ClusterError>,
    ) -> Result<T, ClusterError> {
        let dir = tempfile::Builder::new()
            .prefix("akbench-pw-")
            .tempdir()
            .map_err(io_err(
                "create a temporary folder for the PostgreSQL password",
            ))?;
        let path = dir.path().join("pwfile");
        write_private(&path, secret)?;
        self.account.give(dir.path())?;
        self.account.give(&path)?;
        f(&path)
    }

    /// Sets the superuser's password of a stopped `trust` cluster (single-user mode), switches
    /// `pg_hba.conf` to [`AUTH_METHOD`] and stores the new secret; returns it.
    pub(super) fn migrate_from_trust(&self) -> Result<String, ClusterError> {
        let secret = generate()?;
        let mut child = self
            .pg_command(&self.binaries.postgres)
            .arg("--single")
            .arg("-D")
            .arg(&self.data_dir)
            .args(["-c", "password_encryption=scram-sha-256", SUPERUSER])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io_err("run postgres --single"))?;
        {
            let mut stdin = child.stdin.take().expect("stdin is piped");
            stdin
                .write_all(format!("ALTER ROLE {SUPERUSER} PASSWORD '{secret}'\n").as_bytes())
                .map_err(io_err("send the password to postgres --single"))?;
        }
        let output = child
            .wait_with_output()
            .map_err(io_err("run postgres --single"))?;
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        let action = format!(
            "set a password on the trust-configured cluster in {} (it was initialised by an \
             older akbench)",
            self.data_dir.display()
        );
        if stderr.contains("ERROR") || stderr.contains("FATAL") {
            return Err(ClusterError::Command {
                action,
                program: self.binaries.postgres.display().to_string(),
                status: output.status,
                output: stderr,
            });
        }
        check(output, &action, &self.binaries.postgres)?;
        let hba = self.data_dir.join("pg_hba.conf");
        let text = fs::read_to_string(&hba).map_err(io_err("read pg_hba.conf"))?;
        fs::write(&hba, hba_without_trust(&text)).map_err(io_err("write pg_hba.conf"))?;
        write_private(&secret_path(&self.data_dir), &secret)?;
        Ok(secret)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_methods_become_scram_and_nothing_else_changes() {
        let cases = [
            ("local   all   all   trust", "local all all scram-sha-256"),
            (
                "host    all   all   127.0.0.1/32   trust",
                "host all all 127.0.0.1/32 scram-sha-256",
            ),
            (
                "hostssl all all ::1/128 trust # loopback",
                "hostssl all all ::1/128 scram-sha-256",
            ),
            (
                "host all all 127.0.0.1/32 md5",
                "host all all 127.0.0.1/32 md5",
            ),
            ("# local all all trust", "# local all all trust"),
            ("local replication all peer", "local replication all peer"),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(hba_without_trust(input), format!("{want}\n"), "{input:?}");
        }
    }

    #[test]
    fn secrets_are_fresh_hex_and_written_0600() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        fs::write(&path, "old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&path, &a).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(read(dir.path()).unwrap(), None, "another file name");
        assert_eq!(fs::read_to_string(&path).unwrap(), a);
    }
}

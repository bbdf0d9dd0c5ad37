//! The size cap of every kind of file akbench reads, in one table (docs/limits.md, "Reads",
//! lists the same). A reader names its kind; the cap and the words a message uses come from
//! here, so two readers of the same kind of file cannot disagree.

use std::path::Path;

use super::{Links, ReadProblem};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// A kind of file akbench reads, with its size cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadKind {
    /// A token file (`--token-file` of the CLI, the coordinator and the worker).
    Secret,
    /// A PEM certificate, key or CA bundle (`--ca-file`, `--tls-cert`, `--tls-key`,
    /// `--client-ca`, the CA `akbench certs` signs with).
    Certificate,
    /// Registry credentials (`AKBENCH_REGISTRY_AUTH`, a docker `config.json`).
    RegistryAuth,
    /// A manifest (`experiment.yaml`), `images.toml`, a task's `task.toml`, an agent
    /// descriptor, a cached check.
    Config,
    /// An agent's script.
    Script,
    /// Any other file of a task (instruction, tests, solution, environment).
    TaskFile,
    /// A trial's `run_record.json`, an export manifest, a Harbor `result.json`.
    Record,
    /// A run store document (spec, plans, outcome).
    StoreDocument,
    /// An observations file (JSON Lines).
    Observations,
    /// A stored ATIF trajectory (`trajectory.json`).
    Trajectory,
    /// An agent's or verifier's captured output (stdout, stderr, logs), a diff.
    Log,
}

impl ReadKind {
    /// Every kind, in the table's order.
    pub const ALL: [ReadKind; 11] = [
        ReadKind::Secret,
        ReadKind::Certificate,
        ReadKind::RegistryAuth,
        ReadKind::Config,
        ReadKind::Script,
        ReadKind::TaskFile,
        ReadKind::Record,
        ReadKind::StoreDocument,
        ReadKind::Observations,
        ReadKind::Trajectory,
        ReadKind::Log,
    ];

    /// The most bytes read of a file of this kind; a larger file is refused.
    pub const fn cap(self) -> u64 {
        match self {
            ReadKind::Secret => 64 * KIB,
            ReadKind::Certificate => 4 * MIB,
            ReadKind::RegistryAuth => MIB,
            ReadKind::Config => MIB,
            ReadKind::Script => 16 * MIB,
            ReadKind::TaskFile => 64 * MIB,
            ReadKind::Record => 256 * MIB,
            ReadKind::StoreDocument => 2 * GIB,
            ReadKind::Observations => GIB,
            ReadKind::Trajectory => 256 * MIB,
            ReadKind::Log => GIB,
        }
    }

    /// What a message calls a file of this kind.
    pub const fn what(self) -> &'static str {
        match self {
            ReadKind::Secret => "token file",
            ReadKind::Certificate => "certificate file",
            ReadKind::RegistryAuth => "registry credentials file",
            ReadKind::Config => "configuration file",
            ReadKind::Script => "script",
            ReadKind::TaskFile => "task file",
            ReadKind::Record => "record",
            ReadKind::StoreDocument => "run store document",
            ReadKind::Observations => "observations file",
            ReadKind::Trajectory => "trajectory",
            ReadKind::Log => "log",
        }
    }

    /// Reads the regular file at `path`, at most [`ReadKind::cap`] bytes.
    pub fn read(self, path: &Path, links: Links) -> Result<Vec<u8>, ReadProblem> {
        super::read(path, self.cap(), links)
    }

    /// Reads the regular file at `path` as UTF-8 text, at most [`ReadKind::cap`] bytes.
    pub fn read_text(self, path: &Path, links: Links) -> Result<String, ReadProblem> {
        super::read_text(path, self.cap(), links)
    }

    /// [`ReadKind::read`], with an error that names the file and the fix.
    pub fn load(self, path: &Path, links: Links) -> Result<Vec<u8>, ReadError> {
        self.read(path, links)
            .map_err(|problem| self.error(path, problem))
    }

    /// [`ReadKind::read_text`], with an error that names the file and the fix.
    pub fn load_text(self, path: &Path, links: Links) -> Result<String, ReadError> {
        self.read_text(path, links)
            .map_err(|problem| self.error(path, problem))
    }

    fn error(self, path: &Path, problem: ReadProblem) -> ReadError {
        ReadError {
            kind: self,
            path: path.display().to_string(),
            problem,
        }
    }
}

/// A file that was not read, named with its kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "failed to read the {} {path}: it {problem}; fix: pass a regular file of at most {} bytes",
    kind.what(),
    kind.cap()
)]
pub struct ReadError {
    /// The kind of file.
    pub kind: ReadKind,
    /// The path as given.
    pub path: String,
    /// Why it was not read.
    pub problem: ReadProblem,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_cap_and_a_name() {
        for k in ReadKind::ALL {
            assert!(k.cap() >= 64 * KIB, "{k:?}");
            assert!(!k.what().is_empty());
        }
    }

    #[test]
    fn a_fifo_is_refused_by_name_and_kind() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("token");
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = ReadKind::Secret
            .load_text(&p, Links::Follow)
            .unwrap_err()
            .to_string();
        assert!(e.contains("token file") && e.contains("FIFO"), "{e}");
        assert!(e.contains(&p.display().to_string()), "{e}");
    }
}

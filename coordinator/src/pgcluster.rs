//! Private PostgreSQL clusters started from the system's PostgreSQL binaries.
//!
//! [`PrivateCluster::start`] finds `initdb`, `pg_ctl` and `postgres` (on `PATH`, then in the
//! highest `/usr/lib/postgresql/<version>/bin`), creates a cluster in a folder of its own
//! (`scram-sha-256` password authentication with a generated secret kept 0600 in the data
//! folder, see [`secret`]; loopback only; `-E UTF8 --no-locale`), starts it with `pg_ctl -w`
//! on a free port of 127.0.0.1 with its unix socket inside the data folder, and stops it with
//! `pg_ctl stop -m fast` on [`PrivateCluster::stop`] or on drop.
//!
//! - **Throwaway** (`data_dir = None`): the cluster lives in a fresh temporary folder that is
//!   removed when the cluster is stopped. Tests use these (see `test_support`).
//! - **Persistent** (`data_dir = Some(dir)`): a folder that already holds a cluster is reused;
//!   an empty or missing one is initialised. `akbench up` uses this. A folder initialised
//!   with `trust` by an older version is given a password first ([`secret`]); a
//!   `postmaster.pid` left by a killed run is cleared, a server orphaned by a killed akbench
//!   is stopped, and a live server of another process is refused naming its pid ([`stale`]).
//!
//! `initdb` and `postgres` refuse to run as root. When the current process is root, every
//! PostgreSQL command runs as the unprivileged `postgres` system account (a uid/gid switch
//! between fork and exec, supplementary groups dropped), the cluster folder is given to that
//! account, and every parent folder must be traversable by it: throwaway clusters therefore
//! live under the system temporary folder, never under `/root`.

use std::ffi::CString;
use std::fs;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub mod secret;
pub mod stale;

/// The package that provides the PostgreSQL server binaries on Debian and Ubuntu.
pub const INSTALL_HINT: &str = "apt-get install -y postgresql";

/// The superuser every private cluster is created with.
pub const SUPERUSER: &str = "postgres";

/// The unprivileged account PostgreSQL runs as when the current process is root.
pub const SYSTEM_ACCOUNT: &str = "postgres";

/// How many times a start is retried when the chosen port was taken in the meantime.
const PORT_ATTEMPTS: usize = 5;

/// Server settings every private cluster starts with, before [`ClusterOptions::settings`]
/// (which may override them). A plan's COPY writes about 1.2 GB of WAL per 1,000,000 trials:
/// with PostgreSQL's default `max_wal_size` of 1 GB a submit of that size forced a checkpoint
/// every ~19 s ("checkpoints are occurring too frequently", docs/performance-notebook.md "A million
/// trials"). 4 GB of WAL between checkpoints and a 15 minute timeout let it run through;
/// crash recovery replays at most that much WAL. docs/remote.md says the same for a
/// database of your own.
pub const DEFAULT_SETTINGS: [(&str, &str); 2] =
    [("max_wal_size", "4GB"), ("checkpoint_timeout", "15min")];

/// Why a private cluster could not be found, started, used or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// No folder holds all of `initdb`, `pg_ctl` and `postgres`.
    #[error(
        "failed to find the PostgreSQL server binaries (initdb, pg_ctl, postgres) on PATH or in \
         a PostgreSQL bin folder (searched: {searched}); install them with `{INSTALL_HINT}`"
    )]
    BinariesNotFound {
        /// The folders that were searched, comma-separated.
        searched: String,
    },
    /// Running as root and there is no unprivileged account to run PostgreSQL as.
    #[error(
        "failed to find an account to run PostgreSQL as: initdb and postgres refuse to run as \
         root and there is no `{SYSTEM_ACCOUNT}` system user; create it (`useradd --system \
         {SYSTEM_ACCOUNT}`, or `{INSTALL_HINT}` creates it) or run as a regular user"
    )]
    NoUnprivilegedAccount,
    /// A parent of the cluster folder cannot be traversed by the account PostgreSQL runs as.
    #[error(
        "failed to prepare {data_dir}: user `{user}` cannot traverse {blocked}; put the cluster \
         in a folder that user can reach (for example under /tmp or /var/lib)"
    )]
    Unreachable {
        /// The cluster's data folder.
        data_dir: PathBuf,
        /// The account PostgreSQL runs as.
        user: String,
        /// The first parent folder it cannot traverse.
        blocked: PathBuf,
    },
    /// The data folder is neither empty nor a PostgreSQL cluster.
    #[error(
        "failed to use {0} as a PostgreSQL data folder: it is not empty and holds no cluster \
         (no PG_VERSION); choose an empty or missing folder"
    )]
    NotACluster(PathBuf),
    /// A server of another live process is already running on the data folder.
    #[error(
        "failed to start PostgreSQL on {data_dir}: a server (pid {pid}) is already running on \
         it, started by another process; stop that process (or `pg_ctl stop -D {data_dir}`) or \
         choose another data folder"
    )]
    AlreadyRunning {
        /// The data folder.
        data_dir: PathBuf,
        /// The running postmaster's pid.
        pid: i32,
    },
    /// A database name that is not a plain lowercase identifier.
    #[error(
        "failed to create database {0:?}: use 1-63 characters of a-z, 0-9 and _, starting with \
         a letter or _"
    )]
    InvalidDatabaseName(String),
    /// A file-system or process operation failed.
    #[error("failed to {action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// The underlying error.
        source: io::Error,
    },
    /// A PostgreSQL command exited unsuccessfully.
    #[error("failed to {action}: `{program}` {status}: {output}")]
    Command {
        /// What was being done.
        action: String,
        /// The command's program.
        program: String,
        /// How it exited.
        status: std::process::ExitStatus,
        /// Its output (stderr, stdout, or the tail of the server log).
        output: String,
    },
    /// A SQL statement against the cluster failed.
    #[error("failed to {action}: {source}")]
    Sql {
        /// What was being done.
        action: String,
        /// The underlying error.
        source: tokio_postgres::Error,
    },
}

fn io_err(action: impl Into<String>) -> impl FnOnce(io::Error) -> ClusterError {
    let action = action.into();
    move |source| ClusterError::Io { action, source }
}

/// Where to look for the PostgreSQL binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPath {
    /// Folders searched first, in order (normally the entries of `PATH`).
    pub dirs: Vec<PathBuf>,
    /// Folders holding one subfolder per PostgreSQL major version with a `bin` inside
    /// (normally `/usr/lib/postgresql`); the highest version wins.
    pub versioned_roots: Vec<PathBuf>,
}

impl SearchPath {
    /// `PATH`, then `/usr/lib/postgresql/<highest version>/bin`.
    pub fn system() -> Self {
        let dirs = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        Self {
            dirs,
            versioned_roots: vec![PathBuf::from("/usr/lib/postgresql")],
        }
    }

    /// Searches nothing (for tests of the missing-binaries error).
    pub fn empty() -> Self {
        Self {
            dirs: Vec::new(),
            versioned_roots: Vec::new(),
        }
    }
}

/// The three PostgreSQL server programs, all from one folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgBinaries {
    /// `initdb`.
    pub initdb: PathBuf,
    /// `pg_ctl`.
    pub pg_ctl: PathBuf,
    /// `postgres`.
    pub postgres: PathBuf,
}

impl PgBinaries {
    /// Finds a folder of `search` holding `initdb`, `pg_ctl` and `postgres`.
    pub fn find(search: &SearchPath) -> Result<Self, ClusterError> {
        let mut candidates: Vec<PathBuf> = search.dirs.clone();
        for root in &search.versioned_roots {
            candidates.extend(versioned_bins(root));
        }
        candidates
            .iter()
            .find_map(|dir| Self::in_dir(dir))
            .ok_or_else(|| ClusterError::BinariesNotFound {
                searched: describe_search(search),
            })
    }

    fn in_dir(dir: &Path) -> Option<Self> {
        let bins = Self {
            initdb: dir.join("initdb"),
            pg_ctl: dir.join("pg_ctl"),
            postgres: dir.join("postgres"),
        };
        [&bins.initdb, &bins.pg_ctl, &bins.postgres]
            .iter()
            .all(|p| is_executable(p))
            .then_some(bins)
    }
}

fn describe_search(search: &SearchPath) -> String {
    let mut parts: Vec<String> = search
        .dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    parts.extend(
        search
            .versioned_roots
            .iter()
            .map(|r| format!("{}/<version>/bin", r.display())),
    );
    if parts.is_empty() {
        "nothing".to_string()
    } else {
        parts.join(", ")
    }
}

/// `root/<version>/bin` for every numeric version folder, highest version first.
fn versioned_bins(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(root) else {
        return Vec::new();
    };
    let mut versions: Vec<(Vec<u32>, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let version = name
                .split('.')
                .map(|p| p.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            Some((version, e.path().join("bin")))
        })
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    versions.into_iter().map(|(_, bin)| bin).collect()
}

fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The account PostgreSQL commands run as.
#[derive(Debug, Clone)]
enum Account {
    /// The current (non-root) user.
    Current,
    /// An unprivileged account switched to before exec (the current process is root).
    Switch { name: String, uid: u32, gid: u32 },
}

impl Account {
    fn detect() -> Result<Self, ClusterError> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Ok(Self::Current);
        }
        let (uid, gid) = lookup_user(SYSTEM_ACCOUNT).ok_or(ClusterError::NoUnprivilegedAccount)?;
        if uid == 0 {
            return Err(ClusterError::NoUnprivilegedAccount);
        }
        Ok(Self::Switch {
            name: SYSTEM_ACCOUNT.to_string(),
            uid,
            gid,
        })
    }

    /// Gives `path` to the account (no-op for the current user).
    fn give(&self, path: &Path) -> Result<(), ClusterError> {
        if let Self::Switch { uid, gid, name } = self {
            std::os::unix::fs::chown(path, Some(*uid), Some(*gid))
                .map_err(io_err(format!("give {} to user `{name}`", path.display())))?;
        }
        Ok(())
    }

    /// Checks that every parent of `dir` can be traversed by the account.
    fn check_reachable(&self, dir: &Path) -> Result<(), ClusterError> {
        let Self::Switch { uid, gid, name } = self else {
            return Ok(());
        };
        for parent in dir.ancestors().skip(1) {
            let meta =
                fs::metadata(parent).map_err(io_err(format!("inspect {}", parent.display())))?;
            let mode = meta.mode();
            let ok = if meta.uid() == *uid {
                mode & 0o100 != 0
            } else if meta.gid() == *gid {
                mode & 0o010 != 0
            } else {
                mode & 0o001 != 0
            };
            if !ok {
                return Err(ClusterError::Unreachable {
                    data_dir: dir.to_path_buf(),
                    user: name.clone(),
                    blocked: parent.to_path_buf(),
                });
            }
        }
        Ok(())
    }
}

/// The uid and gid of `name`, from the system's user database.
fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let name = CString::new(name).ok()?;
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: passwd is a plain C struct; all-zero is a valid (empty) value.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the duration of the call and `buf.len()` is the
    // buffer's real size; getpwnam_r is the thread-safe variant.
    let rc = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut result,
        )
    };
    (rc == 0 && !result.is_null()).then_some((pwd.pw_uid, pwd.pw_gid))
}

/// Where and how to start a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// `None` for a throwaway cluster in a temporary folder; `Some` for a persistent one.
    pub data_dir: Option<PathBuf>,
    /// Where to look for the binaries.
    pub search: SearchPath,
    /// Extra server settings, passed as `-c name=value` at start (benchmarks load
    /// `pg_stat_statements` this way).
    pub settings: Vec<(String, String)>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self {
            data_dir: None,
            search: SearchPath::system(),
            settings: Vec::new(),
        }
    }
}

/// A running PostgreSQL cluster of this process's own.
#[derive(Debug)]
pub struct PrivateCluster {
    binaries: PgBinaries,
    account: Account,
    data_dir: PathBuf,
    port: u16,
    running: bool,
    /// The temporary folder of a throwaway cluster; dropped (removed) after the stop.
    temp: Option<tempfile::TempDir>,
    /// Extra `-c name=value` server settings.
    settings: Vec<(String, String)>,
    /// The superuser's password (also in [`secret::SECRET_FILE`]).
    secret: String,
}

impl PrivateCluster {
    /// Starts a throwaway cluster (`None`) or a persistent one in `data_dir`, with the
    /// binaries found on the system search path.
    pub fn start(data_dir: Option<PathBuf>) -> Result<Self, ClusterError> {
        Self::start_with(ClusterOptions {
            data_dir,
            ..ClusterOptions::default()
        })
    }

    /// Starts a cluster as described by `options`.
    pub fn start_with(options: ClusterOptions) -> Result<Self, ClusterError> {
        let binaries = PgBinaries::find(&options.search)?;
        let account = Account::detect()?;
        let (data_dir, temp) = match options.data_dir {
            Some(dir) => (prepare_persistent(&dir, &account)?, None),
            None => {
                let (dir, temp) = prepare_throwaway(&account)?;
                (dir, Some(temp))
            }
        };
        let mut cluster = Self {
            binaries,
            account,
            data_dir,
            port: 0,
            running: false,
            temp,
            settings: options.settings,
            secret: String::new(),
        };
        if !cluster.data_dir.join("PG_VERSION").exists() {
            cluster.secret = secret::generate()?;
            cluster.initdb()?;
            secret::write_private(&secret::secret_path(&cluster.data_dir), &cluster.secret)?;
        } else {
            cluster.clear_leftover()?;
            cluster.secret = match secret::read(&cluster.data_dir)? {
                Some(s) => s,
                None => cluster.migrate_from_trust()?,
            };
        }
        cluster.start_server()?;
        if cluster.temp.is_none() {
            cluster.write_owner()?;
        }
        Ok(cluster)
    }

    /// The port the server listens on (127.0.0.1 only).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster's data folder (also holds the unix socket and `postmaster.log`).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// A connection URL for database `db` as the superuser (with its password), over TCP on
    /// 127.0.0.1.
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgres://{SUPERUSER}:{}@127.0.0.1:{}/{db}",
            self.secret, self.port
        )
    }

    /// [`PrivateCluster::url`] without the password (for printing).
    pub fn display_url(&self, db: &str) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{db}", self.port)
    }

    /// The superuser's password (for tools such as `pgbench`: `PGPASSWORD`).
    pub fn password(&self) -> &str {
        &self.secret
    }

    /// The file holding the superuser's password (mode 0600, in the data folder).
    pub fn secret_file(&self) -> PathBuf {
        secret::secret_path(&self.data_dir)
    }

    /// Creates database `name` (a plain lowercase identifier) and returns its URL.
    pub async fn create_database(&self, name: &str) -> Result<String, ClusterError> {
        if !is_plain_identifier(name) {
            return Err(ClusterError::InvalidDatabaseName(name.to_string()));
        }
        let sql_err = |source| ClusterError::Sql {
            action: format!("create database {name} on port {}", self.port),
            source,
        };
        let (client, connection) =
            tokio_postgres::connect(&self.url("postgres"), tokio_postgres::NoTls)
                .await
                .map_err(sql_err)?;
        let work = async move {
            let result = client
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .await;
            drop(client); // ends the connection future below
            result
        };
        let (result, _) = tokio::join!(work, connection);
        result.map_err(sql_err)?;
        Ok(self.url(name))
    }

    /// Restarts the server with `ssl = on`, this certificate and key (PEM, written into the
    /// data folder for the server's account), and TCP connections allowed only over TLS
    /// (`hostssl` in `pg_hba.conf`). The port changes; [`PrivateCluster::url`] follows.
    pub fn require_tls(&mut self, cert_pem: &str, key_pem: &str) -> Result<(), ClusterError> {
        use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
        let owner = std::fs::metadata(&self.data_dir).map_err(io_err("read the data folder"))?;
        for (name, pem) in [("server.crt", cert_pem), ("server.key", key_pem)] {
            let path = self.data_dir.join(name);
            std::fs::write(&path, pem).map_err(io_err(format!("write {}", path.display())))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(io_err(format!("chmod {}", path.display())))?;
            std::os::unix::fs::chown(&path, Some(owner.uid()), Some(owner.gid()))
                .map_err(io_err(format!("chown {}", path.display())))?;
        }
        let hba = self.data_dir.join("pg_hba.conf");
        let text = std::fs::read_to_string(&hba).map_err(io_err("read pg_hba.conf"))?;
        let tls_only: Vec<String> = text
            .lines()
            .map(|l| match l.strip_prefix("host ") {
                Some(rest) => format!("hostssl {rest}"),
                None => l.to_string(),
            })
            .collect();
        std::fs::write(&hba, tls_only.join("\n") + "\n").map_err(io_err("write pg_hba.conf"))?;
        self.shutdown()?;
        self.settings.push(("ssl".into(), "on".into()));
        self.start_server()
    }

    /// Stops the server (`pg_ctl stop -m fast`) and removes a throwaway cluster's folder.
    pub fn stop(mut self) -> Result<(), ClusterError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), ClusterError> {
        if !self.running {
            return Ok(());
        }
        let postmaster = stale::postmaster_pid(&self.data_dir);
        let output = self
            .pg_command(&self.binaries.pg_ctl)
            .arg("stop")
            .arg("-D")
            .arg(&self.data_dir)
            .args(["-m", "fast", "-w", "-s"])
            .output()
            .map_err(io_err("run pg_ctl stop"))?;
        self.running = false;
        check(output, "stop PostgreSQL", &self.binaries.pg_ctl)?;
        if let Some(pid) = postmaster {
            if !stale::wait_gone(pid, std::time::Duration::from_secs(30)) {
                tracing::warn!(pid, "PostgreSQL removed its postmaster.pid but still runs");
            }
        }
        Ok(())
    }

    /// Stops the server as a crash would (`pg_ctl stop -m immediate`: no checkpoint, the
    /// next start runs crash recovery); [`PrivateCluster::restart`] starts it again.
    pub fn crash(&mut self) -> Result<(), ClusterError> {
        if !self.running {
            return Ok(());
        }
        let output = self
            .pg_command(&self.binaries.pg_ctl)
            .arg("stop")
            .arg("-D")
            .arg(&self.data_dir)
            .args(["-m", "immediate", "-w", "-s"])
            .output()
            .map_err(io_err("run pg_ctl stop -m immediate"))?;
        self.running = false;
        check(output, "stop PostgreSQL at once", &self.binaries.pg_ctl)
    }

    /// Starts a stopped server again on the same data folder and the same port, so that
    /// clients holding its URL reconnect to it.
    pub fn restart(&mut self) -> Result<(), ClusterError> {
        if self.running {
            return Ok(());
        }
        self.start_server_on(Some(self.port))
    }

    fn initdb(&self) -> Result<(), ClusterError> {
        self.with_pwfile(&self.secret, |pwfile| {
            let mut cmd = self.pg_command(&self.binaries.initdb);
            cmd.arg("-D")
                .arg(&self.data_dir)
                .args(["-U", SUPERUSER, "-E", "UTF8", "--no-locale"])
                // A password on every connection, the unix socket included: anyone on the
                // machine can reach loopback, and the superuser can run programs.
                .arg(format!("--auth-local={}", secret::AUTH_METHOD))
                .arg(format!("--auth-host={}", secret::AUTH_METHOD))
                .arg(format!("--pwfile={}", pwfile.display()));
            if self.temp.is_some() {
                // A throwaway cluster does not need its initial files flushed to disk.
                cmd.arg("--no-sync");
            }
            let output = cmd.output().map_err(io_err("run initdb"))?;
            check(
                output,
                &format!("initialise a cluster in {}", self.data_dir.display()),
                &self.binaries.initdb,
            )
        })
    }

    fn start_server(&mut self) -> Result<(), ClusterError> {
        self.start_server_on(None)
    }

    /// Starts the server on `port`, or on a free port (tried up to `PORT_ATTEMPTS` times).
    fn start_server_on(&mut self, port: Option<u16>) -> Result<(), ClusterError> {
        let log = self.data_dir.join("postmaster.log");
        let mut last_error = None;
        let attempts = if port.is_some() { 1 } else { PORT_ATTEMPTS };
        for _ in 0..attempts {
            let port = match port {
                Some(p) => p,
                None => free_port()?,
            };
            let mut options = format!(
                "-p {port} -c listen_addresses=127.0.0.1 -k {}",
                sh_quote(&self.data_dir.to_string_lossy())
            );
            let defaults = DEFAULT_SETTINGS.iter().map(|&(n, v)| (n, v));
            let own = self.settings.iter().map(|(n, v)| (n.as_str(), v.as_str()));
            for (name, value) in defaults.chain(own) {
                options.push_str(&format!(" -c {}", sh_quote(&format!("{name}={value}"))));
            }
            let output = self
                .pg_command(&self.binaries.pg_ctl)
                .arg("start")
                .arg("-D")
                .arg(&self.data_dir)
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "120", "-s", "-o", &options])
                .output()
                .map_err(io_err("run pg_ctl start"))?;
            if output.status.success() {
                self.port = port;
                self.running = true;
                return Ok(());
            }
            let tail = log_tail(&log);
            let port_taken = tail.contains("could not bind") || tail.contains("already in use");
            last_error = Some(ClusterError::Command {
                action: format!(
                    "start PostgreSQL on {} (port {port})",
                    self.data_dir.display()
                ),
                program: self.binaries.pg_ctl.display().to_string(),
                status: output.status,
                output: format!("{}\n{tail}", String::from_utf8_lossy(&output.stderr).trim()),
            });
            if !port_taken {
                break;
            }
        }
        Err(last_error.expect("at least one start attempt"))
    }

    /// A command for a PostgreSQL program, run as the cluster's account.
    fn pg_command(&self, program: &Path) -> Command {
        pg_command(program, &self.account, &self.data_dir)
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        // Best effort: a failure to stop cannot be reported from drop.
        let _ = self.shutdown();
    }
}

fn pg_command(program: &Path, account: &Account, data_dir: &Path) -> Command {
    let mut cmd = Command::new(program);
    // Work from a folder the account can enter (not root's home), and keep variables that
    // would redirect the programs out of the way.
    cmd.current_dir(data_dir.parent().unwrap_or(Path::new("/")))
        .stdin(Stdio::null())
        .env_remove("PGDATA")
        .env_remove("PGPORT")
        .env_remove("PGHOST")
        .env_remove("PGOPTIONS")
        .env("LC_ALL", "C");
    if let Account::Switch { uid, gid, .. } = account {
        // std drops supplementary groups when switching away from root.
        cmd.uid(*uid)
            .gid(*gid)
            .env("HOME", data_dir.parent().unwrap_or(Path::new("/")));
    }
    cmd
}

fn check(output: Output, action: &str, program: &Path) -> Result<(), ClusterError> {
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    Err(ClusterError::Command {
        action: action.to_string(),
        program: program.display().to_string(),
        status: output.status,
        output: format!("{}\n{}", stderr.trim(), stdout.trim())
            .trim()
            .to_string(),
    })
}

fn prepare_throwaway(account: &Account) -> Result<(PathBuf, tempfile::TempDir), ClusterError> {
    let temp = tempfile::Builder::new()
        .prefix("akbench-pg-")
        .tempdir()
        .map_err(io_err("create a temporary folder for PostgreSQL"))?;
    // The folder itself stays private (0700) but belongs to the account; its data folder is
    // created by initdb.
    account.give(temp.path())?;
    let data_dir = temp.path().join("data");
    account.check_reachable(&data_dir)?;
    Ok((data_dir, temp))
}

fn prepare_persistent(dir: &Path, account: &Account) -> Result<PathBuf, ClusterError> {
    let dir = std::path::absolute(dir).map_err(io_err(format!("resolve {}", dir.display())))?;
    if dir.join("PG_VERSION").exists() {
        account.check_reachable(&dir)?;
        return Ok(dir);
    }
    match fs::read_dir(&dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(ClusterError::NotACluster(dir));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(&dir).map_err(io_err(format!("create {}", dir.display())))?;
        }
        Err(e) => return Err(io_err(format!("read {}", dir.display()))(e)),
    }
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
        .map_err(io_err(format!("restrict {}", dir.display())))?;
    account.give(&dir)?;
    account.check_reachable(&dir)?;
    Ok(dir)
}

/// A port on 127.0.0.1 that was free a moment ago (the start retries if it is taken since).
fn free_port() -> Result<u16, ClusterError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(io_err("find a free port on 127.0.0.1"))?;
    let port = listener
        .local_addr()
        .map_err(io_err("find a free port on 127.0.0.1"))?
        .port();
    Ok(port)
}

/// Quotes `s` for the POSIX shell that `pg_ctl -o` goes through.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn log_tail(log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn is_plain_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z' | '_'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
        && name.len() <= 63
}

/// One private cluster per test binary, and a fresh database per test.
#[cfg(any(test, feature = "test-support"))]
pub mod test_support {
    use super::*;
    use std::process::ChildStdin;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::{Mutex, OnceLock};

    struct Shared {
        cluster: PrivateCluster,
        /// The write end of the guardian's stdin: when this process exits, however it exits,
        /// the pipe closes and the guardian stops the cluster and removes its folder.
        _guardian: Mutex<ChildStdin>,
    }

    static SHARED: OnceLock<Shared> = OnceLock::new();
    static NEXT_DB: AtomicU32 = AtomicU32::new(0);

    /// The test binary's shared throwaway cluster, started on first use.
    ///
    /// Panics when the cluster cannot be started (the message says what to install).
    pub fn shared() -> &'static PrivateCluster {
        &SHARED
            .get_or_init(|| {
                let cluster =
                    PrivateCluster::start(None).unwrap_or_else(|e| panic!("test cluster: {e}"));
                let guardian = spawn_guardian(&cluster)
                    .unwrap_or_else(|e| panic!("test cluster guardian: {e}"));
                Shared {
                    cluster,
                    _guardian: Mutex::new(guardian),
                }
            })
            .cluster
    }

    /// Creates a database of its own on the shared cluster and returns its URL.
    pub async fn fresh_database() -> String {
        let name = format!(
            "t_{}_{}",
            std::process::id(),
            NEXT_DB.fetch_add(1, Ordering::Relaxed)
        );
        shared()
            .create_database(&name)
            .await
            .unwrap_or_else(|e| panic!("test database: {e}"))
    }

    /// The shared cluster frozen: its postmaster and every process it started (backends,
    /// background workers) stopped with `SIGSTOP`, the postmaster first so it starts no
    /// new one, until the returned guard is dropped (`SIGCONT`), or at the latest after
    /// `at_most`: a detached `sh` sends the `SIGCONT` then even when the test process is
    /// killed meanwhile, so the freeze is bounded. (Each backend leads a process group of
    /// its own, so stopping the postmaster's group would leave them running.) Connections
    /// stay open and queries simply hang, as on a database host that stalls (swapping, a
    /// paused VM, a storage hiccup).
    pub fn freeze(at_most: std::time::Duration) -> Frozen {
        let cluster = shared();
        let postmaster = stale::postmaster_pid(cluster.data_dir())
            .unwrap_or_else(|| panic!("no postmaster.pid in {}", cluster.data_dir().display()));
        stop(postmaster, libc::SIGSTOP);
        let mut pids = vec![postmaster];
        pids.extend(children(postmaster));
        let list: Vec<String> = pids.iter().map(i32::to_string).collect();
        let safety_net = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "sleep {}; kill -CONT {} 2>/dev/null",
                at_most.as_secs().max(1),
                list.join(" ")
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("failed to start the freeze's safety net: {e}"));
        for &pid in &pids[1..] {
            stop(pid, libc::SIGSTOP);
        }
        Frozen { pids, safety_net }
    }

    /// Sends `signal` to `pid`.
    fn stop(pid: i32, signal: i32) {
        // SAFETY: kill sends a signal to a process.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(
            rc, 0,
            "failed to send signal {signal} to PostgreSQL process {pid}"
        );
    }

    /// The processes whose parent is `parent` (from `/proc/<pid>/stat`, field 4).
    fn children(parent: i32) -> Vec<i32> {
        let mut found = Vec::new();
        for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `pid (comm) state ppid ...`: comm may hold spaces, so read after the last ')'.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<i32>().ok());
            if ppid == Some(parent) {
                found.push(pid);
            }
        }
        found
    }

    /// A frozen shared cluster ([`freeze`]); dropping it lets the cluster run again.
    #[derive(Debug)]
    pub struct Frozen {
        /// The postmaster first, then its children.
        pids: Vec<i32>,
        /// The `sh` that would send the `SIGCONT` at the latest.
        safety_net: std::process::Child,
    }

    impl Drop for Frozen {
        fn drop(&mut self) {
            for &pid in self.pids.iter().rev() {
                // SAFETY: kill sends a signal to a process.
                unsafe { libc::kill(pid, libc::SIGCONT) };
            }
            let _ = self.safety_net.kill();
            let _ = self.safety_net.wait();
        }
    }

    /// A `sh` that waits for its stdin to close, then stops the cluster and removes its
    /// temporary folder. Statics are never dropped, so this is what cleans up.
    fn spawn_guardian(cluster: &PrivateCluster) -> Result<ChildStdin, ClusterError> {
        let base = cluster.data_dir.parent().unwrap_or(Path::new("/"));
        let mut child = pg_command(Path::new("sh"), &cluster.account, &cluster.data_dir)
            .arg("-c")
            .arg(r#"read _ignored; "$0" stop -D "$1" -m fast -w -s >/dev/null 2>&1; rm -rf "$2""#)
            .arg(&cluster.binaries.pg_ctl)
            .arg(&cluster.data_dir)
            .arg(base)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(io_err("spawn the test cluster's guardian"))?;
        Ok(child.stdin.take().expect("stdin is piped"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binaries_name_the_package() {
        let dir = tempfile::tempdir().unwrap();
        let search = SearchPath {
            dirs: vec![dir.path().to_path_buf()],
            versioned_roots: vec![],
        };
        let err = PgBinaries::find(&search).unwrap_err();
        let message = err.to_string();
        assert!(message.starts_with("failed to find"), "{message}");
        assert!(message.contains(INSTALL_HINT), "{message}");
        assert!(
            message.contains(&dir.path().display().to_string()),
            "{message}"
        );

        let options = ClusterOptions {
            data_dir: None,
            search: SearchPath::empty(),
            settings: Vec::new(),
        };
        let err = PrivateCluster::start_with(options).unwrap_err();
        assert!(
            matches!(err, ClusterError::BinariesNotFound { .. }),
            "{err}"
        );
    }

    #[test]
    fn highest_version_folder_wins_and_all_three_binaries_are_required() {
        let root = tempfile::tempdir().unwrap();
        for (version, programs) in [
            ("9.6", &["initdb", "pg_ctl", "postgres"][..]),
            ("15", &["initdb", "pg_ctl", "postgres"][..]),
            ("16", &["initdb", "pg_ctl"][..]),
        ] {
            let bin = root.path().join(version).join("bin");
            fs::create_dir_all(&bin).unwrap();
            for p in programs {
                fs::write(bin.join(p), "#!/bin/sh\n").unwrap();
                fs::set_permissions(bin.join(p), fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        fs::create_dir_all(root.path().join("not-a-version")).unwrap();
        let search = SearchPath {
            dirs: vec![],
            versioned_roots: vec![root.path().to_path_buf()],
        };
        let found = PgBinaries::find(&search).unwrap();
        assert_eq!(found.initdb, root.path().join("15/bin/initdb"));
    }

    #[test]
    fn database_names_are_plain_identifiers() {
        assert!(is_plain_identifier("t_1_2"));
        assert!(!is_plain_identifier("1abc"));
        assert!(!is_plain_identifier("a-b"));
        assert!(!is_plain_identifier("Abc"));
        assert!(!is_plain_identifier(""));
        assert!(!is_plain_identifier(&"a".repeat(64)));
    }

    #[test]
    fn shell_quoting_survives_quotes() {
        assert_eq!(sh_quote("/tmp/a'b"), r"'/tmp/a'\''b'");
    }
}

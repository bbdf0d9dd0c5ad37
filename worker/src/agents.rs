//! Agents installed by akbench: the agent cache (one folder per `(package, version,
//! platform)`, [`akbench_core::agent::install::Install::key`]), installing an entry once
//! (a lock so two workers do not race, built in a temporary folder then renamed, a marker
//! written last), and finding an installed one.
//!
//! An entry holds its own runtime, so a task image without Node.js or Python runs it: the
//! worker's `node` (npm packages) or `python3` (PyPI packages, the standard library with
//! it) is copied into `rt/bin`, with the shared libraries it and every ELF file of the entry
//! need and the dynamic loader into `rt/lib`; the copied interpreter is patched (`patchelf`)
//! to use that loader and look in `rt/lib` first. `bin/<program>` is a `/bin/sh` launcher
//! running the package's program with that interpreter. Paths inside are the entry's own
//! absolute paths: the sandbox and the container runtimes bind the entry read-only at the
//! same path. No environment variable is set for the agent, so the commands it runs see
//! the image's own tools.
//!
//! ```text
//! <cache>/<key>/akbench-install.json   the marker: what is installed, and its runtime
//! <cache>/<key>/bin/<program>          the launcher
//! <cache>/<key>/rt/{bin,lib}           the runtime
//! <cache>/<key>/pkg                    npm: `npm install --prefix` of the package
//! <cache>/<key>/rt/lib/python3/dist-packages   PyPI: `pip install --target` of it
//! ```

use akbench_core::agent::install::{platform, Ecosystem, Install, KnownAgent, KNOWN};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Overrides the agent cache's location.
pub const CACHE_ENV: &str = "AKBENCH_AGENTS_CACHE";

/// The marker file of a complete entry.
pub const MARKER: &str = "akbench-install.json";

/// The agent cache: `$AKBENCH_AGENTS_CACHE`; else, for root, `/var/cache/akbench/agents`
/// (a folder the sandbox's unprivileged users can reach); else
/// `${XDG_CACHE_HOME:-$HOME/.cache}/akbench/agents`.
pub fn cache_root() -> PathBuf {
    if let Some(p) = std::env::var_os(CACHE_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from("/var/cache/akbench/agents");
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join("akbench/agents")
}

/// The marker of an installed entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// What is installed.
    pub install: Install,
    /// The platform it was installed for.
    pub platform: String,
    /// The runtime bundled with it (`node v20.20.2`, `python 3.11.2`).
    pub runtime: String,
    /// The folder it was built at (canonical): its launcher and interpreter name paths
    /// inside it, so an entry reached at another path (the cache moved, or named through a
    /// link or `..`) is built again rather than run broken.
    #[serde(default)]
    pub built_at: Option<PathBuf>,
}

/// An installed agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// The entry's folder (bound read-only where the agent runs).
    pub dir: PathBuf,
    /// Its launcher, `<dir>/bin/<program>`.
    pub program: PathBuf,
    /// Its marker.
    pub marker: Marker,
}

/// The marker of the entry in `dir`, when it has a readable one (read bounded, a link
/// refused).
fn read_marker(dir: &Path) -> Option<Marker> {
    use akbench_core::bounded_read::{Links, ReadKind};
    let text = ReadKind::Config
        .read_text(&dir.join(MARKER), Links::Refuse)
        .ok()?;
    serde_json::from_str(&text).ok()
}

/// The entry of `install` under `root`, when it is complete (its marker names it).
pub fn find(root: &Path, install: &Install) -> Option<Installed> {
    let dir = root.join(install.key(&platform())).canonicalize().ok()?;
    let marker = read_marker(&dir)?;
    let here = marker.built_at.as_deref() == Some(dir.as_path());
    (marker.install == *install && here).then(|| Installed {
        program: dir.join("bin").join(&install.program),
        dir,
        marker,
    })
}

/// One row of `akbench agent list`: a known agent at its pinned version and its entry, or
/// another installed entry of a known agent (another version or package).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The adapter.
    pub adapter: String,
    /// npm or pypi.
    pub ecosystem: Ecosystem,
    /// The package.
    pub package: String,
    /// The version.
    pub version: String,
    /// Whether this is the version akbench pins (else an installed override).
    pub pinned: bool,
    /// The program.
    pub program: String,
    /// The entry's folder, when installed.
    pub installed: Option<PathBuf>,
    /// Its bundled runtime, when installed.
    pub runtime: Option<String>,
}

/// The known agents at their pinned versions and whether each is installed under `root`,
/// then the other complete entries there (sorted by folder).
pub fn list(root: &Path) -> Vec<Row> {
    let row = |adapter: &str, install: &Install, pinned: bool, found: Option<Installed>| Row {
        adapter: adapter.to_string(),
        ecosystem: install.ecosystem,
        package: install.package.clone(),
        version: install.version.clone(),
        pinned,
        program: install.program.clone(),
        runtime: found.as_ref().map(|f| f.marker.runtime.clone()),
        installed: found.map(|f| f.dir),
    };
    let mut rows: Vec<Row> = KNOWN
        .iter()
        .map(|k: &KnownAgent| {
            let pinned = Install::pinned(k);
            row(k.adapter, &pinned, true, find(root, &pinned))
        })
        .collect();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for d in dirs {
        let Some(marker) = read_marker(&d) else {
            continue;
        };
        let Some(found) = find(root, &marker.install).filter(|f| f.dir == d) else {
            continue;
        };
        let Some(k) = KNOWN.iter().find(|k| {
            k.program == marker.install.program && k.ecosystem == marker.install.ecosystem
        }) else {
            continue;
        };
        if marker.install != Install::pinned(k) {
            rows.push(row(k.adapter, &marker.install, false, Some(found)));
        }
    }
    rows
}

/// Installs `install` under `root` unless it is there; returns the entry. Another process
/// installing the same entry is waited for.
pub fn install(root: &Path, install: &Install) -> Result<Installed, String> {
    if let Some(i) = find(root, install) {
        return Ok(i);
    }
    let key = install.key(&platform());
    let what = format!(
        "failed to install {} {}@{}",
        install.ecosystem.as_str(),
        install.package,
        install.version
    );
    mkdir(root).map_err(|e| format!("{what}: {e}"))?;
    // Canonical: the entry's programs name the paths it is built at.
    let root = &root
        .canonicalize()
        .map_err(|e| format!("{what}: {}: {e}", root.display()))?;
    let _lock = lock(&root.join(format!(".{key}.lock"))).map_err(|e| format!("{what}: {e}"))?;
    if let Some(i) = find(root, install) {
        return Ok(i);
    }
    let dir = root.join(&key);
    // Under the lock no one else builds this entry: a temporary folder of it is a crashed
    // install's.
    let stale = format!(".tmp-{key}-");
    for e in std::fs::read_dir(root).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with(&stale) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    let tmp = root.join(format!("{stale}{}", std::process::id()));
    let built = build(&tmp, &dir, install);
    let done = built.and_then(|marker| {
        let text = serde_json::to_string_pretty(&marker).map_err(|e| e.to_string())?;
        std::fs::write(tmp.join(MARKER), text).map_err(|e| format!("marker: {e}"))?;
        // An incomplete entry (no marker) left by a crash is replaced.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&tmp, &dir).map_err(|e| format!("rename to {}: {e}", dir.display()))
    });
    if let Err(e) = done {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(format!("{what}: {e}"));
    }
    find(root, install).ok_or_else(|| format!("{what}: its marker is unreadable"))
}

fn mkdir(d: &Path) -> Result<(), String> {
    std::fs::create_dir_all(d).map_err(|e| format!("create {}: {e}", d.display()))?;
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("chmod {}: {e}", d.display()))
}

fn lock(path: &Path) -> Result<std::fs::File, String> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| format!("open {}: {e}", path.display()))?;
    // SAFETY: a valid open descriptor.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(format!(
            "lock {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(f)
}

/// How long one installer command may run (`npm install`, `pip install`, a copy's
/// `patchelf`): past it, the command's process group is ended (SIGTERM, then SIGKILL 5 s
/// later) and the install fails, so a hung registry never holds an attempt's slot.
/// `AKBENCH_AGENT_INSTALL_TIMEOUT_SEC` overrides it.
pub const INSTALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20 * 60);

/// The installer commands' deadline: [`INSTALL_TIMEOUT`] unless the worker's
/// `AKBENCH_AGENT_INSTALL_TIMEOUT_SEC` sets a positive number of seconds.
fn install_timeout() -> std::time::Duration {
    std::env::var("AKBENCH_AGENT_INSTALL_TIMEOUT_SEC")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(std::time::Duration::from_secs_f64)
        .unwrap_or(INSTALL_TIMEOUT)
}

/// A read-write file with no name (made in the temporary folder and unlinked at once).
fn unnamed_file() -> std::io::Result<std::fs::File> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        ".akbench-install-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

/// Runs `cmd` in a process group of its own, its output read from files (no pipe to fill),
/// ended with its group past [`install_timeout`]; its stdout, or the tail of its stderr in
/// the error when it fails.
fn run(mut cmd: Command) -> Result<String, String> {
    use std::os::unix::process::CommandExt;
    let shown = format!("{cmd:?}");
    let out = unnamed_file().map_err(|e| format!("{shown}: {e}"))?;
    let err = unnamed_file().map_err(|e| format!("{shown}: {e}"))?;
    let (out2, err2) = (
        out.try_clone().map_err(|e| e.to_string())?,
        err.try_clone().map_err(|e| e.to_string())?,
    );
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(out2)
        .stderr(err2)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("{shown}: {e}"))?;
    let limit = install_timeout();
    let started = std::time::Instant::now();
    let group = i32::try_from(child.id()).unwrap_or(0);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) if started.elapsed() < limit => {
                std::thread::sleep(std::time::Duration::from_millis(100))
            }
            Ok(None) => {
                // SAFETY: signals the child's own process group (never 0: the group of a
                // spawned child is its pid).
                unsafe { libc::kill(-group, libc::SIGTERM) };
                let grace = std::time::Instant::now();
                while grace.elapsed() < std::time::Duration::from_secs(5) {
                    if let Ok(Some(_)) = child.try_wait() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                // SAFETY: as above.
                unsafe { libc::kill(-group, libc::SIGKILL) };
                let _ = child.wait();
                break Err(format!(
                    "{shown} did not finish in {} s and was stopped (AKBENCH_AGENT_INSTALL_TIMEOUT_SEC)",
                    limit.as_secs_f64()
                ));
            }
            Err(e) => break Err(format!("{shown}: {e}")),
        }
    }?;
    let read = |mut f: std::fs::File| {
        use std::io::{Read, Seek};
        let mut v = Vec::new();
        let _ = f.rewind().and_then(|_| f.read_to_end(&mut v));
        String::from_utf8_lossy(&v).into_owned()
    };
    if !status.success() {
        let err = read(err);
        let tail: Vec<&str> = err.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!("{shown} exited with {status}: {}", tail.join("\n")));
    }
    Ok(read(out))
}

/// A program on the worker's `PATH`, resolved to its real file.
fn which(program: &str) -> Result<PathBuf, String> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok())
        .ok_or_else(|| {
            format!("`{program}` is not on this worker's PATH; fix: install it (the agent's runtime is copied from it)")
        })
}

/// Builds the entry in `tmp`; its paths are those of `dir`, where it is renamed to.
fn build(tmp: &Path, dir: &Path, install: &Install) -> Result<Marker, String> {
    mkdir(&tmp.join("bin"))?;
    mkdir(&tmp.join("rt/bin"))?;
    mkdir(&tmp.join("rt/lib"))?;
    let spec = format!("{}@{}", install.package, install.version);
    // The interpreter, its name in `rt/bin`, what it is, the launcher's command.
    let (interp, name, runtime, launcher) = match install.ecosystem {
        Ecosystem::Npm => {
            let node = which("node")?;
            let npm = which("npm")?;
            let version = run({
                let mut c = Command::new(&node);
                c.arg("--version");
                c
            })?;
            let pkg = tmp.join("pkg");
            mkdir(&pkg)?;
            let mut c = Command::new(node.clone());
            c.arg(&npm).args([
                "install",
                "--no-fund",
                "--no-audit",
                "--omit=dev",
                "--no-save",
                "--prefix",
            ]);
            c.arg(&pkg).arg(&spec);
            run(c)?;
            let bin = Path::new("pkg/node_modules/.bin").join(&install.program);
            let target = std::fs::read(tmp.join(&bin)).map_err(|e| {
                format!(
                    "the package has no program `{}` ({e}); fix: name a package that provides it",
                    install.program
                )
            })?;
            let first = target.split(|b| *b == b'\n').next().unwrap_or_default();
            let script =
                if first.starts_with(b"#!") && String::from_utf8_lossy(first).contains("node") {
                    format!(
                        "exec {} {} \"$@\"\n",
                        quote(&dir.join("rt/bin/node")),
                        quote(&dir.join(&bin))
                    )
                } else {
                    format!("exec {} \"$@\"\n", quote(&dir.join(&bin)))
                };
            (
                node,
                "node".to_string(),
                format!("node {}", version.trim()),
                script,
            )
        }
        Ecosystem::Pypi => {
            // The system's python3 (not a virtual environment's or a shim), its standard
            // library copied with it.
            let python = match Path::new("/usr/bin/python3") {
                p if p.is_file() => std::fs::canonicalize(p).map_err(|e| e.to_string())?,
                _ => which("python3")?,
            };
            let info = run({
                let mut c = Command::new(&python);
                c.args([
                    "-c",
                    "import sys, sysconfig; print('%d.%d' % sys.version_info[:2]); print(sys.version.split()[0]); print(sysconfig.get_paths()['stdlib'])",
                ]);
                c
            })?;
            let mut lines = info.lines();
            let (short, full, stdlib) = (
                lines.next().unwrap_or_default().to_string(),
                lines.next().unwrap_or_default().to_string(),
                PathBuf::from(lines.next().unwrap_or_default()),
            );
            let lib = tmp.join("rt/lib").join(format!("python{short}"));
            copy_tree(&stdlib, &lib, &|name| {
                !matches!(
                    name,
                    "test"
                        | "__pycache__"
                        | "site-packages"
                        | "dist-packages"
                        | "idlelib"
                        | "tkinter"
                        | "turtledemo"
                )
            })?;
            let site = tmp.join("rt/lib/python3/dist-packages");
            // pip from a throwaway virtual environment of that python (ensurepip's): the
            // system's own may be missing or refuse (PEP 668).
            let venv = tmp.join(".pip-venv");
            run({
                let mut c = Command::new(&python);
                c.args(["-m", "venv"]).arg(&venv);
                c
            })
            .map_err(|e| format!("{e}; fix: install python3-venv on the worker"))?;
            let mut c = Command::new(venv.join("bin/python"));
            c.args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-input",
                "--no-compile",
                "--target",
            ]);
            c.arg(&site)
                .arg(format!("{}=={}", install.package, install.version));
            run(c)?;
            std::fs::remove_dir_all(&venv).map_err(|e| e.to_string())?;
            // Compiled now (the entry is read-only where the agent runs), the sources named
            // by their final paths in tracebacks. Only a speed-up: a file that does not
            // compile (a package's Python 2 example) fails at import as it would anyway.
            let _ = run({
                let mut c = Command::new(&python);
                c.args(["-m", "compileall", "-q", "-j", "0", "-s"])
                    .arg(tmp)
                    .arg("-p")
                    .arg(dir)
                    .arg(tmp.join("rt/lib"));
                c
            });
            let script = site.join("bin").join(&install.program);
            if !script.is_file() {
                return Err(format!(
                    "the package has no program `{}`; fix: name a package that provides it",
                    install.program
                ));
            }
            let exe = format!("python{short}");
            let launcher = format!(
                "exec {} -s {} \"$@\"\n",
                quote(&dir.join("rt/bin").join(&exe)),
                quote(
                    &dir.join("rt/lib/python3/dist-packages/bin")
                        .join(&install.program)
                )
            );
            (python, exe, format!("python {full}"), launcher)
        }
    };
    let copied = tmp.join("rt/bin").join(&name);
    std::fs::copy(&interp, &copied).map_err(|e| format!("copy {}: {e}", interp.display()))?;
    bundle_libraries(tmp)?;
    let mut p = Command::new("patchelf");
    p.arg("--set-interpreter")
        .arg(dir.join("rt/lib").join(LOADER))
        .args(["--force-rpath", "--set-rpath", "$ORIGIN/../lib"])
        .arg(&copied);
    run(p).map_err(|e| format!("{e}; fix: install patchelf on the worker"))?;
    let file = tmp.join("bin").join(&install.program);
    std::fs::write(&file, format!("#!/bin/sh\n{launcher}")).map_err(|e| e.to_string())?;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    readable_by_all(tmp)?;
    Ok(Marker {
        install: install.clone(),
        platform: platform(),
        runtime,
        built_at: Some(dir.to_path_buf()),
    })
}

/// The dynamic loader's name in `rt/lib`.
const LOADER: &str = "ld-linux.so";

/// `'...'` for `/bin/sh`.
fn quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// Copies `from` into `to` (links kept as links), leaving out entries `keep` refuses.
fn copy_tree(from: &Path, to: &Path, keep: &dyn Fn(&str) -> bool) -> Result<(), String> {
    mkdir(to)?;
    for e in std::fs::read_dir(from).map_err(|e| format!("read {}: {e}", from.display()))? {
        let e = e.map_err(|e| e.to_string())?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !keep(&name) {
            continue;
        }
        let (src, dst) = (e.path(), to.join(&name));
        let t = e.file_type().map_err(|e| e.to_string())?;
        if t.is_symlink() {
            let l = std::fs::read_link(&src).map_err(|e| e.to_string())?;
            std::os::unix::fs::symlink(l, &dst).map_err(|e| e.to_string())?;
        } else if t.is_dir() {
            copy_tree(&src, &dst, keep)?;
        } else if t.is_file() {
            std::fs::copy(&src, &dst).map_err(|e| format!("copy {}: {e}", src.display()))?;
        }
    }
    Ok(())
}

/// Every ELF file under `d`.
fn elf_files(d: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            elf_files(&e.path(), out);
        } else if t.is_file() {
            let mut magic = [0u8; 4];
            let is_elf = std::fs::File::open(e.path())
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
                .is_ok()
                && magic == *b"\x7fELF";
            if is_elf {
                out.push(e.path());
            }
        }
    }
}

/// Copies into `<tmp>/rt/lib` the shared libraries (`ldd`) of every ELF file of the entry
/// found outside it, and the dynamic loader as [`LOADER`].
fn bundle_libraries(tmp: &Path) -> Result<(), String> {
    let lib = tmp.join("rt/lib");
    let mut files = Vec::new();
    elf_files(tmp, &mut files);
    let mut loader = None;
    for f in &files {
        let Ok(out) = Command::new("ldd").arg(f).output() else {
            return Err("`ldd` failed to start; fix: install libc-bin on the worker".into());
        };
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let line = line.trim();
            if let Some((name, rest)) = line.split_once(" => ") {
                let Some(path) = rest
                    .split_whitespace()
                    .next()
                    .filter(|p| p.starts_with('/'))
                else {
                    continue;
                };
                let dst = lib.join(name.trim());
                if !Path::new(path).starts_with(tmp) && !dst.exists() {
                    std::fs::copy(path, &dst).map_err(|e| format!("copy {path}: {e}"))?;
                }
            } else if line.starts_with('/') && line.contains("ld-linux") {
                loader = line.split_whitespace().next().map(PathBuf::from);
            }
        }
    }
    let loader = loader.ok_or("found no dynamic loader in `ldd`'s output")?;
    std::fs::copy(&loader, lib.join(LOADER))
        .map_err(|e| format!("copy {}: {e}", loader.display()))?;
    Ok(())
}

/// `a+rX` on everything under `d`: the sandbox's user reads the entry.
fn readable_by_all(d: &Path) -> Result<(), String> {
    for e in std::fs::read_dir(d).map_err(|e| e.to_string())?.flatten() {
        let t = e.file_type().map_err(|e| e.to_string())?;
        if t.is_symlink() {
            continue;
        }
        let p = e.path();
        let mode = std::fs::metadata(&p)
            .map_err(|e| e.to_string())?
            .permissions()
            .mode();
        let add = if t.is_dir() || mode & 0o100 != 0 {
            0o555
        } else {
            0o444
        };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode | add))
            .map_err(|e| e.to_string())?;
        if t.is_dir() {
            readable_by_all(&p)?;
        }
    }
    Ok(())
}

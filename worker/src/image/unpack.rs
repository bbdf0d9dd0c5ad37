//! Applies image layers, lowest first, to a root folder: regular files, folders, symbolic
//! and hard links; whiteouts and opaque folders remove what lower layers put there; device
//! nodes, FIFOs and sockets are skipped. No entry may write outside the root: names with
//! `..` are refused, and every parent is resolved inside the root (a symbolic link in the
//! image, absolute or relative, is followed as the image sees it, never to the host).
//! Set-uid and set-gid bits are dropped. Under a root worker every entry is owned by the
//! sandbox user (the image's root is the sandbox user, never host uid 0).
//!
//! Every entry and every byte written is counted against the image's [`Budget`]
//! (`akbench_core::image::limits`) as it is unpacked: an image over its caps stops
//! mid-layer, before the disk fills. A parent folder the layer has no entry for is
//! created as docker and containerd do (mode 0755, the entries' owner).

use crate::root_path::resolve;
use akbench_core::image::layer::{self, Action, Compression};
use akbench_core::image::limits::Budget;
use std::collections::HashSet;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Unpacks the layer in `blob` onto `root`, read in the compression its first bytes are in
/// (`layer::detect`; Docker's manifests call even an uncompressed layer `tar.gzip`).
/// Each entry and byte counts against `budget` (shared by the image's layers).
pub fn apply(
    root: &Path,
    blob: &Path,
    owner: Option<(u32, u32)>,
    budget: &mut Budget,
) -> Result<(), String> {
    use std::io::BufRead;
    let f =
        std::fs::File::open(blob).map_err(|e| format!("failed to open {}: {e}", blob.display()))?;
    let mut f = std::io::BufReader::with_capacity(1 << 20, f);
    let head = f
        .fill_buf()
        .map_err(|e| format!("failed to read the layer {}: {e}", blob.display()))?;
    let reader: Box<dyn Read> = match layer::detect(head) {
        Compression::None => Box::new(f),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(f)),
        Compression::Zstd => Box::new(
            ruzstd::decoding::StreamingDecoder::new(f)
                .map_err(|e| format!("failed to read the zstd layer {}: {e}", blob.display()))?,
        ),
    };
    let mut archive = tar::Archive::new(reader);
    let mut made: HashSet<PathBuf> = HashSet::new();
    let entries = archive
        .entries()
        .map_err(|e| format!("failed to read the layer {}: {e}", blob.display()))?;
    for entry in entries {
        let mut entry =
            entry.map_err(|e| format!("failed to read the layer {}: {e}", blob.display()))?;
        let name = entry
            .path()
            .map_err(|e| format!("an entry name of {} is unreadable: {e}", blob.display()))?
            .into_owned();
        let action = layer::action(&name).map_err(|e| format!("layer {}: {e}", blob.display()))?;
        budget
            .entry()
            .map_err(|e| format!("layer {}: {e}", blob.display()))?;
        apply_entry(root, &mut entry, action, owner, &mut made, budget)
            .map_err(|e| format!("layer {}: entry `{}`: {e}", blob.display(), name.display()))?;
    }
    Ok(())
}

fn apply_entry<R: Read>(
    root: &Path,
    entry: &mut tar::Entry<'_, R>,
    action: Action,
    owner: Option<(u32, u32)>,
    made: &mut HashSet<PathBuf>,
    budget: &mut Budget,
) -> Result<(), String> {
    let err = |e: std::io::Error| e.to_string();
    match action {
        Action::Root => Ok(()),
        Action::Remove(rel) => {
            // A whiteout in a folder no lower layer made removes nothing.
            if !parent_exists(root, &rel)? {
                return Ok(());
            }
            let p = place(root, &rel, None)?;
            remove(&p).map_err(err)
        }
        Action::Opaque(rel) => {
            let dir = if rel.as_os_str().is_empty() {
                root.to_path_buf()
            } else if !parent_exists(root, &rel)? {
                return Ok(());
            } else {
                place(root, &rel, None)?
            };
            let Ok(rd) = std::fs::read_dir(&dir) else {
                return Ok(());
            };
            for e in rd.flatten() {
                let child = rel.join(e.file_name());
                if !made.contains(&child) {
                    remove(&e.path()).map_err(err)?;
                }
            }
            Ok(())
        }
        Action::Put(rel) => {
            let p = place(root, &rel, Some(owner))?;
            let h = entry.header();
            let mode = layer::kept_mode(h.mode().map_err(err)?);
            let kind = h.entry_type();
            let existing = std::fs::symlink_metadata(&p).ok();
            if kind.is_dir() {
                match existing {
                    Some(m) if m.is_dir() => {}
                    Some(_) => {
                        remove(&p).map_err(err)?;
                        std::fs::create_dir(&p).map_err(err)?;
                    }
                    None => std::fs::create_dir(&p).map_err(err)?,
                }
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).map_err(err)?;
            } else if kind.is_file() || kind == tar::EntryType::Continuous {
                budget.fits(h.size().map_err(err)?)?;
                if existing.is_some() {
                    remove(&p).map_err(err)?;
                }
                let mut out = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode_ext(mode)
                    .open(&p)
                    .map_err(err)?;
                copy_counted(entry, &mut out, budget)?;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).map_err(err)?;
            } else if kind.is_symlink() {
                let target = entry
                    .link_name()
                    .map_err(err)?
                    .ok_or("a symbolic link without a target")?
                    .into_owned();
                if existing.is_some() {
                    remove(&p).map_err(err)?;
                }
                std::os::unix::fs::symlink(&target, &p).map_err(err)?;
            } else if kind.is_hard_link() {
                let target = entry
                    .link_name()
                    .map_err(err)?
                    .ok_or("a hard link without a target")?
                    .into_owned();
                let trel = layer::relative(&target)?.ok_or("a hard link to the root")?;
                let tp = place(root, &trel, None)?;
                let tm = std::fs::symlink_metadata(&tp)
                    .map_err(|e| format!("its target `{}`: {e}", target.display()))?;
                if tm.is_dir() {
                    return Err(format!("it links to the folder `{}`", target.display()));
                }
                if existing.is_some() && tp != p {
                    remove(&p).map_err(err)?;
                }
                if tp != p {
                    std::fs::hard_link(&tp, &p).map_err(err)?;
                }
                made.insert(rel);
                return Ok(());
            } else {
                // Character and block devices, FIFOs, sockets and unknown kinds.
                return Ok(());
            }
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::lchown(&p, Some(uid), Some(gid)).map_err(err)?;
            }
            made.insert(rel);
            Ok(())
        }
    }
}

trait ModeExt {
    fn mode_ext(&mut self, mode: u32) -> &mut Self;
}

impl ModeExt for std::fs::OpenOptions {
    fn mode_ext(&mut self, mode: u32) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        // Owner-writable while it is written; the final mode is set after.
        self.mode(mode | 0o200)
    }
}

fn remove(p: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
    }
}

/// Copies an entry's contents into `out`, counting each piece against `budget` before it is
/// written (a layer whose sizes lie is still stopped at the cap).
fn copy_counted(
    entry: &mut impl Read,
    out: &mut impl std::io::Write,
    budget: &mut Budget,
) -> Result<(), String> {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match entry.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.to_string()),
        };
        budget.bytes(n as u64)?;
        out.write_all(&buf[..n]).map_err(|e| e.to_string())?;
    }
}

/// The host path of `rel` inside `root`: its parent folders resolved as the image sees
/// them (a symbolic link followed inside `root`, `..` never above it), the last component
/// as it is (not followed). With `create` (an entry being put, with its owner), a missing
/// parent folder is made as docker makes it: mode 0755, owned like the entries; without
/// it, a missing parent is an error.
pub fn place(
    root: &Path,
    rel: &Path,
    create: Option<Option<(u32, u32)>>,
) -> Result<PathBuf, String> {
    let name = rel.file_name().ok_or("an entry without a name")?;
    let parent = resolve(root, rel.parent().unwrap_or(Path::new("")))?;
    let dir = root.join(&parent);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("its folder `{}` is not a folder", parent.display())),
        Err(_) => match create {
            Some(owner) => make_parents(root, &parent, owner)?,
            None => return Err(format!("its folder `{}` does not exist", parent.display())),
        },
    }
    Ok(dir.join(name))
}

/// Whether the folder `rel` is in exists (resolved inside `root`).
fn parent_exists(root: &Path, rel: &Path) -> Result<bool, String> {
    let parent = resolve(root, rel.parent().unwrap_or(Path::new("")))?;
    Ok(std::fs::symlink_metadata(root.join(parent)).is_ok_and(|m| m.is_dir()))
}

/// Makes each missing folder of `parent` (resolved, relative to `root`) with mode 0755 and
/// `owner`. `parent` is resolved, so what exists of it holds no symbolic link.
fn make_parents(root: &Path, parent: &Path, owner: Option<(u32, u32)>) -> Result<(), String> {
    let mut at = root.to_path_buf();
    for c in parent.components() {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => continue,
            Ok(_) => {
                return Err(format!(
                    "its folder `{}` is not a folder",
                    at.strip_prefix(root).unwrap_or(&at).display()
                ))
            }
            Err(_) => {}
        }
        let made = |e: std::io::Error| format!("failed to make its folder {}: {e}", at.display());
        std::fs::create_dir(&at).map_err(made)?;
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o755)).map_err(made)?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::lchown(&at, Some(uid), Some(gid)).map_err(made)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use akbench_core::image::limits::ImageLimits;

    enum E<'a> {
        Dir(&'a str),
        File(&'a str, &'a str),
        Link(&'a str, &'a str),
        Hard(&'a str, &'a str),
        Char(&'a str),
        Fifo(&'a str),
    }

    /// A tar layer of `entries` written to `path`.
    fn layer(path: &Path, entries: &[E<'_>]) {
        let mut b = tar::Builder::new(Vec::new());
        for e in entries {
            let mut h = tar::Header::new_gnu();
            h.set_mode(0o755);
            h.set_size(0);
            let (name, data): (&str, &[u8]) = match e {
                E::Dir(n) => {
                    h.set_entry_type(tar::EntryType::Directory);
                    (n, b"")
                }
                E::File(n, c) => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_mode(0o4755);
                    h.set_size(c.len() as u64);
                    (n, c.as_bytes())
                }
                E::Link(n, t) | E::Hard(n, t) => {
                    h.set_entry_type(if matches!(e, E::Link(..)) {
                        tar::EntryType::Symlink
                    } else {
                        tar::EntryType::Link
                    });
                    h.set_link_name(t).unwrap();
                    (n, b"")
                }
                E::Char(n) => {
                    h.set_entry_type(tar::EntryType::Char);
                    (n, b"")
                }
                E::Fifo(n) => {
                    h.set_entry_type(tar::EntryType::Fifo);
                    (n, b"")
                }
            };
            // Raw names: `set_path` itself refuses `..`, as a hostile layer would not.
            let raw = &mut h.as_old_mut().name;
            raw.fill(0);
            raw[..name.len()].copy_from_slice(name.as_bytes());
            h.set_cksum();
            b.append(&h, data).unwrap();
        }
        std::fs::write(path, b.into_inner().unwrap()).unwrap();
    }

    fn apply_all(root: &Path, dir: &Path, layers: &[&[E<'_>]]) -> Result<(), String> {
        for (i, l) in layers.iter().enumerate() {
            let p = dir.join(format!("l{i}.tar"));
            layer(&p, l);
            apply(root, &p, None, &mut ImageLimits::default().budget())?;
        }
        Ok(())
    }

    #[test]
    fn layers_apply_whiteouts_opaque_folders_links_and_skip_devices() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        std::fs::create_dir(&root).unwrap();
        use E::*;
        apply_all(
            &root,
            d.path(),
            &[
                &[
                    Dir("./etc/"),
                    File("./etc/motd", "hello"),
                    File("./etc/keep", "k"),
                    Dir("./var/"),
                    Dir("./var/lib/"),
                    File("./var/lib/old", "o"),
                    Dir("./usr/"),
                    Dir("./usr/bin/"),
                    Link("./bin", "usr/bin"),
                    File("./usr/bin/tool", "t"),
                    Char("./dev-null"),
                    Fifo("./fifo"),
                ],
                &[
                    File("etc/.wh.motd", ""),
                    Dir("var/lib/"),
                    File("var/lib/.wh..wh..opq", ""),
                    File("var/lib/new", "n"),
                    // Through the image's own symlink /bin -> usr/bin.
                    File("bin/other", "o2"),
                    Hard("etc/keep-link", "etc/keep"),
                ],
            ],
        )
        .unwrap();
        let read = |p: &str| std::fs::read_to_string(root.join(p)).ok();
        assert_eq!(read("etc/motd"), None, "whiteout");
        assert_eq!(read("etc/keep").as_deref(), Some("k"));
        assert_eq!(read("var/lib/old"), None, "opaque folder");
        assert_eq!(read("var/lib/new").as_deref(), Some("n"));
        assert_eq!(read("usr/bin/other").as_deref(), Some("o2"));
        assert_eq!(read("etc/keep-link").as_deref(), Some("k"));
        use std::os::unix::fs::MetadataExt;
        let ino = |p: &str| std::fs::metadata(root.join(p)).unwrap().ino();
        assert_eq!(ino("etc/keep"), ino("etc/keep-link"));
        assert!(!root.join("dev-null").exists() && !root.join("fifo").exists());
        let mode = std::fs::metadata(root.join("usr/bin/tool")).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o755, "set-uid dropped");
    }

    #[test]
    fn no_entry_writes_outside_the_root() {
        use E::*;
        let cases: Vec<(&str, Vec<Vec<E<'_>>>, &str)> = vec![
            ("dotdot", vec![vec![File("../escaped", "x")]], "climbs out"),
            (
                "deep",
                vec![vec![Dir("a/"), File("a/../../escaped", "x")]],
                "climbs out",
            ),
            // An absolute symlink is the image's /, never the host's.
            (
                "abs-link",
                vec![vec![Link("evil", "/"), File("evil/escaped", "x")]],
                "",
            ),
            (
                "rel-link",
                vec![vec![Link("up", "../../.."), File("up/escaped", "x")]],
                "",
            ),
            ("hard", vec![vec![Hard("h", "../outside")]], "climbs out"),
            (
                "whiteout",
                vec![vec![File("../.wh.outside", "")]],
                "climbs out",
            ),
        ];
        for (name, layers, want) in cases {
            let d = tempfile::tempdir().unwrap();
            let root = d.path().join("a/b/root");
            std::fs::create_dir_all(&root).unwrap();
            std::fs::write(d.path().join("a/b/outside"), "host").unwrap();
            let refs: Vec<&[E<'_>]> = layers.iter().map(Vec::as_slice).collect();
            let got = apply_all(&root, d.path(), &refs);
            if want.is_empty() {
                got.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(
                    root.join("escaped").is_file(),
                    "{name}: not inside the root"
                );
            } else {
                let e = got.unwrap_err();
                assert!(e.contains(want), "{name}: {e}");
            }
            for p in ["a/escaped", "a/b/escaped", "escaped"] {
                assert!(
                    !d.path().join(p).exists(),
                    "{name}: wrote {p} outside the root"
                );
            }
            assert_eq!(
                std::fs::read_to_string(d.path().join("a/b/outside")).unwrap(),
                "host"
            );
        }
    }

    #[test]
    fn gzip_and_zstd_layers_unpack() {
        let d = tempfile::tempdir().unwrap();
        let plain = d.path().join("l.tar");
        layer(&plain, &[E::File("hello", "world")]);
        let bytes = std::fs::read(&plain).unwrap();
        let gz = d.path().join("l.tar.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, &bytes).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        let zst = d.path().join("l.tar.zst");
        std::fs::write(
            &zst,
            ruzstd::encoding::compress_to_vec(
                &bytes[..],
                ruzstd::encoding::CompressionLevel::Fastest,
            ),
        )
        .unwrap();
        // Whatever the manifest called them: each is read as its bytes are.
        for (i, p) in [&gz, &zst, &plain].into_iter().enumerate() {
            let root = d.path().join(format!("root-{i}"));
            std::fs::create_dir(&root).unwrap();
            apply(&root, p, None, &mut ImageLimits::default().budget()).unwrap();
            assert_eq!(
                std::fs::read_to_string(root.join("hello")).unwrap(),
                "world"
            );
        }
        // A blob that says gzip but is not: refused.
        let bad = d.path().join("bad.tar.gz");
        std::fs::write(&bad, [0x1f, 0x8b, 0, 0, 1, 2, 3]).unwrap();
        let root = d.path().join("bad");
        std::fs::create_dir(&root).unwrap();
        assert!(apply(&root, &bad, None, &mut ImageLimits::default().budget()).is_err());
    }
    fn budget(bytes: u64, files: u64) -> Budget {
        ImageLimits {
            unpacked_bytes: bytes,
            files,
            ..ImageLimits::default()
        }
        .budget()
    }

    /// A gzip layer of 8 MiB of zeros (a few KiB compressed) stops at a 1 MiB cap, in the
    /// middle of the entry, naming the cap and its variable; nothing past the cap is written.
    #[test]
    fn a_gzip_bomb_stops_at_the_unpacked_bytes_cap() {
        let d = tempfile::tempdir().unwrap();
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_path("zeros").unwrap();
        h.set_mode(0o644);
        h.set_size(8 << 20);
        h.set_cksum();
        b.append(&h, std::io::repeat(0).take(8 << 20)).unwrap();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut enc, &b.into_inner().unwrap()).unwrap();
        let gz = enc.finish().unwrap();
        assert!(gz.len() < 64 << 10, "{} bytes compressed", gz.len());
        let blob = d.path().join("bomb.tar.gz");
        std::fs::write(&blob, gz).unwrap();
        let root = d.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let e = apply(&root, &blob, None, &mut budget(1 << 20, 100)).unwrap_err();
        assert!(
            e.contains("more than 1048576 unpacked bytes") && e.contains("AKBENCH_IMAGE_MAX_BYTES"),
            "{e}"
        );
        // The declared size is refused before a byte is written...
        assert!(std::fs::symlink_metadata(root.join("zeros")).is_err());
        // The bytes of earlier layers count: the next layer stops at the same cap.
        let mut budget = budget(1 << 20, 100);
        budget.bytes((1 << 20) - 10).unwrap();
        let small = d.path().join("small.tar");
        layer(&small, &[E::File("eleven", "eleven byte")]);
        let e = apply(&root, &small, None, &mut budget).unwrap_err();
        assert!(e.contains("AKBENCH_IMAGE_MAX_BYTES"), "{e}");
    }

    #[test]
    fn too_many_entries_stop_at_the_files_cap() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let blob = d.path().join("many.tar");
        let names: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
        let entries: Vec<E<'_>> = names.iter().map(|n| E::File(n, "x")).collect();
        layer(&blob, &entries);
        let mut b = budget(1 << 20, 10);
        let e = apply(&root, &blob, None, &mut b).unwrap_err();
        assert!(
            e.contains("more than 10 entries") && e.contains("AKBENCH_IMAGE_MAX_FILES"),
            "{e}"
        );
        let written = std::fs::read_dir(&root).unwrap().count();
        assert_eq!(written, 10, "stopped at the cap, mid-layer");
        // The budget is the image's: a second layer counts on from the first.
        let mut b = budget(1 << 20, 25);
        let root2 = d.path().join("root2");
        std::fs::create_dir(&root2).unwrap();
        apply(&root2, &blob, None, &mut b).unwrap();
        assert!(apply(&root2, &blob, None, &mut b).is_err());
    }

    /// A layer with `a/b/c/file` and no entries for `a`, `a/b`, `a/b/c` unpacks (docker and
    /// containerd accept it): the folders are made with mode 0755.
    #[test]
    fn a_layer_without_its_parent_folders_unpacks_with_them_made() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        std::fs::create_dir(&root).unwrap();
        apply_all(
            &root,
            d.path(),
            &[&[
                E::File("a/b/c/file", "deep"),
                E::Link("x/y/link", "../../a"),
                E::Hard("h/hard", "a/b/c/file"),
                // Whiteouts in folders no layer made remove nothing.
                E::File("q/r/.wh.s", ""),
                E::File("m/n/.wh..wh..opq", ""),
            ]],
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("a/b/c/file")).unwrap(),
            "deep"
        );
        for dir in ["a", "a/b", "a/b/c", "x", "x/y", "h"] {
            let m = std::fs::symlink_metadata(root.join(dir)).unwrap();
            assert!(m.is_dir(), "{dir}");
            assert_eq!(m.mode() & 0o7777, 0o755, "{dir}");
        }
        assert!(std::fs::symlink_metadata(root.join("x/y/link"))
            .unwrap()
            .file_type()
            .is_symlink());
        // A parent that exists as a file is still refused; a missing parent is never made
        // outside the root (through a symbolic link it is made where the image sees it).
        let e = apply_all(&root, d.path(), &[&[E::File("a/b/c/file/under", "x")]]).unwrap_err();
        assert!(e.contains("is not a folder"), "{e}");
        apply_all(
            &root,
            d.path(),
            &[&[E::Link("out", "/"), E::File("out/new/dir/f", "in")]],
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("new/dir/f")).unwrap(),
            "in"
        );
        assert!(!d.path().join("new").exists());
    }
}

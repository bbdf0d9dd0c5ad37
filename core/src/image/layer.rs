//! What one tar entry of an image layer does to the root file system being built.
//!
//! Entry names are made relative and checked: a `..` component is refused (a layer may not
//! write outside the root), `./` and a leading `/` are dropped. Whiteouts (OCI image spec,
//! "Representing Changes"): `.wh.NAME` removes `NAME` from the layers below, and
//! `.wh..wh..opq` in a folder hides everything the layers below put in it.

use std::path::{Component, Path, PathBuf};

/// The opaque-folder marker.
pub const OPAQUE: &str = ".wh..wh..opq";
/// The prefix of a whiteout file.
pub const WHITEOUT_PREFIX: &str = ".wh.";

/// Layer media types akbench unpacks, with their compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// An uncompressed tar.
    None,
    /// gzip.
    Gzip,
    /// zstd.
    Zstd,
}

/// The compression of a layer media type, or `None` when akbench does not unpack it (a
/// foreign or encrypted layer).
pub fn compression(media_type: &str) -> Option<Compression> {
    match media_type {
        "application/vnd.oci.image.layer.v1.tar"
        | "application/vnd.docker.image.rootfs.diff.tar" => Some(Compression::None),
        "application/vnd.oci.image.layer.v1.tar+gzip"
        | "application/vnd.docker.image.rootfs.diff.tar.gzip" => Some(Compression::Gzip),
        "application/vnd.oci.image.layer.v1.tar+zstd" => Some(Compression::Zstd),
        _ => None,
    }
}

/// The compression a layer blob is actually in, from its first bytes (gzip `1f 8b`, zstd
/// `28 b5 2f fd`, else an uncompressed tar): what unpacking reads, whatever the media type
/// says. Docker labels every layer of the manifests it pushes `tar.gzip`, also one it
/// mounted from an uncompressed blob of another repository (a base image pushed as plain
/// tar), and reads blobs by these bytes itself; the media type only decides whether a
/// layer is one akbench unpacks at all ([`compression`]).
pub fn detect(head: &[u8]) -> Compression {
    if head.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// What an entry means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The root folder itself (`./`): its metadata only.
    Root,
    /// Create or replace the entry at this relative path.
    Put(PathBuf),
    /// Remove this relative path (a `.wh.NAME` whiteout).
    Remove(PathBuf),
    /// Empty this relative folder of what lower layers put there (`.wh..wh..opq`); the
    /// empty path is the root.
    Opaque(PathBuf),
}

/// Normalises an entry name to a path relative to the root: `./a/b` and `/a/b` are `a/b`;
/// `None` for the root; an error for `..` or an empty component that is not a separator.
pub fn relative(name: &Path) -> Result<Option<PathBuf>, String> {
    let mut out = PathBuf::new();
    for c in name.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir => {
                return Err(format!(
                    "the entry `{}` climbs out of the image root with `..`",
                    crate::limits::elide(&name.display().to_string())
                ))
            }
            Component::Prefix(_) => {
                return Err(format!("the entry `{}` has a path prefix", name.display()))
            }
        }
    }
    Ok((!out.as_os_str().is_empty()).then_some(out))
}

/// What the entry named `name` does.
pub fn action(name: &Path) -> Result<Action, String> {
    let Some(rel) = relative(name)? else {
        return Ok(Action::Root);
    };
    let file = rel
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parent = rel.parent().map(Path::to_path_buf).unwrap_or_default();
    if file == OPAQUE {
        return Ok(Action::Opaque(parent));
    }
    if let Some(hidden) = file.strip_prefix(WHITEOUT_PREFIX) {
        if hidden.is_empty() || hidden == "." || hidden == ".." {
            return Err(format!("the whiteout `{}` names no entry", rel.display()));
        }
        return Ok(Action::Remove(parent.join(hidden)));
    }
    Ok(Action::Put(rel))
}

/// The permission bits kept for an unpacked entry: set-uid, set-gid dropped (the sandbox
/// runs with `no_new_privs` anyway; the cache holds no privileged program).
pub fn kept_mode(mode: u32) -> u32 {
    mode & 0o1777
}

//! Which object hash a task's repository uses (sha1: 40 hex, sha256: 64 hex), read from a
//! local repository's config or a bundle's header, so a `source.commit` of the wrong length
//! is refused when the task loads rather than failing at run time in the mirror cache.
//! Remote URLs are not contacted: their hash is unknown at load and either length passes.

use super::RepoLocation;
use crate::bounded_read::{read, read_prefix, Links};
use std::path::Path;

/// The hex length of the repository's object ids, when it can be read from disk.
pub fn hex_len(repo: &RepoLocation) -> Option<usize> {
    let path = match repo {
        RepoLocation::Path(p) => p.clone(),
        RepoLocation::Url(u) => Path::new(u.strip_prefix("file://")?).to_path_buf(),
    };
    if path.is_dir() {
        let config = [path.join("config"), path.join(".git").join("config")]
            .into_iter()
            .find(|c| c.is_file())?;
        let text = read(
            &config,
            crate::bounded_read::ReadKind::Config.cap(),
            Links::Follow,
        )
        .ok()?;
        Some(config_hex_len(&String::from_utf8_lossy(&text)))
    } else {
        let head = read_prefix(&path, 4096, Links::Follow).ok()?;
        bundle_hex_len(&String::from_utf8_lossy(&head))
    }
}

/// From a git config: 64 when `extensions.objectformat = sha256`, else 40.
pub fn config_hex_len(config: &str) -> usize {
    let mut in_extensions = false;
    for line in config.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_extensions = line.to_ascii_lowercase().starts_with("[extensions");
        } else if in_extensions {
            let l = line.to_ascii_lowercase().replace(' ', "");
            if l.starts_with("objectformat=sha256") {
                return 64;
            }
        }
    }
    40
}

/// From a bundle's header: 40 for a v2 bundle or v3 without `@object-format=sha256`, 64 with
/// it; `None` when the text is not a bundle header.
pub fn bundle_hex_len(head: &str) -> Option<usize> {
    let mut lines = head.lines();
    match lines.next()? {
        "# v2 git bundle" => Some(40),
        "# v3 git bundle" => Some(
            if lines
                .take_while(|l| l.starts_with('@'))
                .any(|l| l.trim() == "@object-format=sha256")
            {
                64
            } else {
                40
            },
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_length_comes_from_the_config_or_the_bundle_header() {
        assert_eq!(config_hex_len("[core]\n\tbare = true\n"), 40);
        assert_eq!(
            config_hex_len(
                "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectFormat = sha256\n"
            ),
            64
        );
        assert_eq!(config_hex_len("[other]\n\tobjectformat = sha256\n"), 40);
        assert_eq!(
            bundle_hex_len("# v2 git bundle\nabc refs/heads/main\n"),
            Some(40)
        );
        assert_eq!(
            bundle_hex_len("# v3 git bundle\n@object-format=sha256\n\nabc HEAD\n"),
            Some(64)
        );
        assert_eq!(
            bundle_hex_len("# v3 git bundle\n@filter=blob:none\n"),
            Some(40)
        );
        assert_eq!(bundle_hex_len("PK\u{3}\u{4}"), None);
        let url = RepoLocation::Url("https://example.com/x.git".into());
        assert_eq!(hex_len(&url), None);
        let bundle =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/repos/wordcount.bundle");
        assert_eq!(hex_len(&RepoLocation::Path(bundle)), Some(40));
    }
}

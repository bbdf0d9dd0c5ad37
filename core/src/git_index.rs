//! Reading the entries of a git index file (the `DIRC` format, versions 2 and 3), for one
//! question: do two index files describe the same tree?
//!
//! The worker collects an attempt's work by running `git add --all` on an index that started
//! as the baseline's checkout. When the index's entries (path, mode, object id, stage) are
//! the same before and after, `git write-tree` would write the baseline's own tree (a tree is
//! a function of those entries), so neither `write-tree` nor `diff-tree` needs to run: the
//! agent changed nothing. Anything this reader does not know for sure (index version 4, an
//! entry with extended flags such as intent-to-add or skip-worktree, a truncated file) makes
//! it answer `None`, and the caller asks git.

/// One index entry, as far as a tree is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// File mode (`0o100644`, `0o100755`, `0o120000`, `0o160000`).
    pub mode: u32,
    /// The object id (20 bytes for SHA-1).
    pub oid: &'a [u8],
    /// Merge stage (0 for a normal entry).
    pub stage: u16,
    /// The path, `/`-separated.
    pub path: &'a [u8],
}

/// Size of an entry before its path: ctime, mtime (8 each), dev, ino, mode, uid, gid, size
/// (4 each), the object id, then 2 bytes of flags.
const fn fixed_len(oid_len: usize) -> usize {
    40 + oid_len + 2
}

/// The entries of an index file of version 2 or 3 whose object ids are `oid_len` bytes long,
/// or `None` when the bytes are not such an index or hold an entry this reader does not
/// handle (extended flags).
pub fn entries(index: &[u8], oid_len: usize) -> Option<Vec<Entry<'_>>> {
    if index.len() < 12 || &index[..4] != b"DIRC" {
        return None;
    }
    let version = u32::from_be_bytes(index[4..8].try_into().ok()?);
    if version != 2 && version != 3 {
        return None;
    }
    let count = usize::try_from(u32::from_be_bytes(index[8..12].try_into().ok()?)).ok()?;
    let fixed = fixed_len(oid_len);
    let mut at = 12usize;
    let mut out = Vec::with_capacity(count.min(index.len() / fixed));
    for _ in 0..count {
        let head = index.get(at..at.checked_add(fixed)?)?;
        let mode = u32::from_be_bytes(head[24..28].try_into().ok()?);
        let oid = &index[at + 40..at + 40 + oid_len];
        let flags = u16::from_be_bytes(head[fixed - 2..fixed].try_into().ok()?);
        if flags & 0x4000 != 0 {
            // Extended flags (intent-to-add, skip-worktree): let git decide.
            return None;
        }
        let stage = (flags >> 12) & 0x3;
        let name_start = at + fixed;
        let nul = index.get(name_start..)?.iter().position(|b| *b == 0)?;
        let path = &index[name_start..name_start + nul];
        if usize::from(flags & 0x0fff) != nul.min(0x0fff) {
            return None;
        }
        // The entry is padded with 1 to 8 NULs to a multiple of 8 bytes.
        let len = fixed + nul;
        let padded = (len + 8) & !7;
        at = at.checked_add(padded)?;
        if at > index.len() {
            return None;
        }
        out.push(Entry {
            mode,
            oid,
            stage,
            path,
        });
    }
    Some(out)
}

/// True when both index files are readable here and list the same entries (path, mode,
/// object id, stage) in the same order: they describe the same tree. `false` means "not
/// known to be the same" (ask git).
pub fn same_entries(a: &[u8], b: &[u8], oid_len: usize) -> bool {
    match (entries(a, oid_len), entries(b, oid_len)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// A SHA-256 of an index's entries (path, mode, object id, stage; stat data left out), so a
/// caller can keep 32 bytes instead of the index and later ask [`same_entries`]'s question:
/// equal digests mean the same tree. `None` when [`entries`] cannot read the index.
pub fn entries_digest(index: &[u8], oid_len: usize) -> Option<[u8; 32]> {
    use sha2::{Digest as _, Sha256};
    let mut h = Sha256::new();
    for e in entries(index, oid_len)? {
        // Lengths first, so no two different lists hash the same bytes.
        h.update((e.path.len() as u64).to_be_bytes());
        h.update(e.path);
        h.update(e.mode.to_be_bytes());
        h.update(e.stage.to_be_bytes());
        h.update(e.oid);
    }
    Some(h.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index of `version` holding `(path, mode, oid byte, flags extra)` entries.
    fn index(version: u32, items: &[(&str, u32, u8, u16)]) -> Vec<u8> {
        let mut v = b"DIRC".to_vec();
        v.extend(version.to_be_bytes());
        v.extend(u32::try_from(items.len()).unwrap().to_be_bytes());
        for (path, mode, oid, extra) in items {
            let start = v.len();
            v.extend([7u8; 24]); // ctime, mtime, dev, ino: anything
            v.extend(mode.to_be_bytes());
            v.extend([9u8; 12]); // uid, gid, size: anything
            v.extend([*oid; 20]);
            let flags = u16::try_from(path.len().min(0xfff)).unwrap() | extra;
            v.extend(flags.to_be_bytes());
            v.extend(path.as_bytes());
            let len = v.len() - start;
            v.extend(std::iter::repeat_n(0u8, ((len + 8) & !7) - len));
        }
        v.extend(b"TREE\0\0\0\0"); // an extension after the entries is not read
        v.extend([0u8; 20]); // checksum
        v
    }

    #[test]
    fn entries_of_versions_2_and_3_are_read_and_anything_else_is_not() {
        let base = [
            ("README.md", 0o100644, 1, 0),
            ("src/a_longer_name.py", 0o100755, 2, 0),
            ("x", 0o120000, 3, 0),
        ];
        for version in [2, 3] {
            let bytes = index(version, &base);
            let e = entries(&bytes, 20).expect("readable");
            assert_eq!(e.len(), 3);
            assert_eq!(e[1].path, b"src/a_longer_name.py");
            assert_eq!(e[1].mode, 0o100755);
            assert_eq!(e[1].oid, &[2u8; 20][..]);
            assert_eq!(e[2].stage, 0);
        }
        let cases: [(&str, Vec<u8>); 5] = [
            ("version 4", index(4, &base)),
            ("extended flags", index(3, &[("a", 0o100644, 1, 0x4000)])),
            ("not an index", b"PACK\0\0\0\x02\0\0\0\0".to_vec()),
            ("truncated", index(2, &base)[..60].to_vec()),
            ("empty", Vec::new()),
        ];
        for (what, bytes) in cases {
            assert_eq!(entries(&bytes, 20), None, "{what}");
        }
        let staged = index(2, &[("a", 0o100644, 1, 0x2000)]);
        let staged = entries(&staged, 20).unwrap();
        assert_eq!(staged[0].stage, 2);
    }

    #[test]
    fn same_entries_is_true_only_for_the_same_paths_modes_ids_and_stages() {
        let base = [("a", 0o100644, 1, 0), ("b/c", 0o100644, 2, 0)];
        let a = index(2, &base);
        let cases: [(&str, Vec<u8>, bool); 8] = [
            ("identical", index(2, &base), true),
            ("same entries, version 3", index(3, &base), true),
            (
                "content changed",
                index(2, &[base[0], ("b/c", 0o100644, 9, 0)]),
                false,
            ),
            (
                "mode changed",
                index(2, &[base[0], ("b/c", 0o100755, 2, 0)]),
                false,
            ),
            (
                "file added",
                index(2, &[base[0], base[1], ("d", 0o100644, 1, 0)]),
                false,
            ),
            ("file removed", index(2, &base[..1]), false),
            (
                "renamed",
                index(2, &[base[0], ("b/d", 0o100644, 2, 0)]),
                false,
            ),
            ("unreadable", index(4, &base), false),
        ];
        for (what, b, want) in cases {
            assert_eq!(same_entries(&a, &b, 20), want, "{what}");
            let digests = (entries_digest(&a, 20), entries_digest(&b, 20));
            let same_digest = digests.0.is_some() && digests.0 == digests.1;
            assert_eq!(same_digest, want, "digest: {what}");
        }
        // Stat data (and the version) are not part of the digest; paths are delimited.
        assert_eq!(
            entries_digest(&index(2, &[("ab", 0o100644, 1, 0)]), 20),
            entries_digest(&index(3, &[("ab", 0o100644, 1, 0)]), 20)
        );
        assert_ne!(
            entries_digest(
                &index(2, &[("a", 0o100644, 1, 0), ("b", 0o100644, 1, 0)]),
                20
            ),
            entries_digest(&index(2, &[("ab", 0o100644, 1, 0)]), 20)
        );
    }
}

//! What of an agent's worktree git cannot record as it is, and the rule for it (pure).
//!
//! COLLECTING records the agent's work as a git tree and a diff. Some things an agent can
//! leave have no git form, and left in place they either stop `git add` (a name git refuses,
//! an empty nested repository, a FIFO where a tracked file was) or vanish from the diff
//! without a word (a committed nested repository becomes a gitlink and its files are lost, a
//! path too long for git to open is skipped). The worker therefore walks the worktree first
//! and sets each such entry aside ([`classify`]) for the time git reads the worktree, then
//! puts it back; every entry set aside is named in the record (`workspace.not_collected`,
//! [`Why`]):
//!
//! - an entry named `.git` below the worktree's root (a nested repository's folder, or a
//!   `gitdir:` file): git records no `.git`, and with one present it records the folder as
//!   a submodule; set aside, the folder's other files are collected as plain files;
//! - a name git refuses to record ([`git_refuses`]: `.GIT` in any case, NTFS aliases of
//!   `.git` such as `git~1` or `.git ` with trailing dots or spaces, a link named
//!   `.gitmodules`), with everything below it;
//! - a special file (FIFO, socket, device): git records only files, links and folders; a
//!   tracked file replaced by one is recorded as removed;
//! - an entry whose path in the worktree is longer than [`MAX_PATH_BYTES`], with everything
//!   below it (git cannot open paths past the system's limit and skips them silently).
//!
//! The worktree's own `.git` at its root is the agent's repository: never collected, never
//! named. Unreadable files and folders are not in this rule: the worker makes them readable
//! (it owns what the agent wrote) or, when it cannot, the attempt is the agent's failure
//! naming the path.

/// The longest worktree-relative path collected, in bytes: git opens paths relative to the
/// worktree and the system refuses paths of 4,096 bytes or more; the margin keeps the
/// worker's own absolute paths (work root + path) under that limit too.
pub const MAX_PATH_BYTES: usize = 3072;

/// The most entries a record lists in `workspace.not_collected`; the rest are counted.
pub const MAX_LISTED: usize = 100;

/// What kind of entry a worktree path is (as `lstat` sees it: links are not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A folder.
    Dir,
    /// A regular file.
    File,
    /// A symbolic link.
    Symlink,
    /// A FIFO (named pipe).
    Fifo,
    /// A unix socket.
    Socket,
    /// A character or block device.
    Device,
}

/// Why an entry is not collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// A `.git` below the worktree's root.
    NestedRepository,
    /// A name git refuses to record.
    RefusedName,
    /// A FIFO, socket or device.
    SpecialFile(Kind),
    /// Longer than [`MAX_PATH_BYTES`].
    PathTooLong,
}

impl Why {
    /// The reason as the record states it (`workspace.not_collected[].why`).
    pub fn describe(self) -> String {
        match self {
            Why::NestedRepository => "nested repository: its `.git` is not collected (git records none); the folder's other files are collected as plain files".into(),
            Why::RefusedName => "name git refuses to record (`.git` in another case or an NTFS alias of it, a link named `.gitmodules`); not collected, nor anything below it".into(),
            Why::SpecialFile(k) => format!(
                "special file ({}): git records only files, links and folders; not collected (a tracked file replaced by one is recorded as removed)",
                match k {
                    Kind::Fifo => "FIFO",
                    Kind::Socket => "socket",
                    _ => "device",
                }
            ),
            Why::PathTooLong => format!(
                "path too long: more than {MAX_PATH_BYTES} bytes from the worktree's root; not collected, nor anything below it"
            ),
        }
    }
}

/// What the worker does with one worktree entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Collect it (and, for a folder, look inside).
    Collect,
    /// The worktree's own repository: neither collected nor named.
    Own,
    /// Set it aside while git reads the worktree, and name it.
    SetAside(Why),
}

/// The rule for the entry at the worktree-relative path `rel` (`/`-separated bytes, its
/// last component the entry's name) of kind `kind`.
pub fn classify(rel: &[u8], kind: Kind) -> Decision {
    let name = rel.rsplit(|b| *b == b'/').next().unwrap_or(rel);
    if name == b".git" {
        return if rel == b".git" {
            Decision::Own
        } else {
            Decision::SetAside(Why::NestedRepository)
        };
    }
    if let Kind::Fifo | Kind::Socket | Kind::Device = kind {
        return Decision::SetAside(Why::SpecialFile(kind));
    }
    // A folder named like `.gitmodules` is refused too: git refuses any link below it.
    if git_refuses(name, matches!(kind, Kind::Symlink | Kind::Dir)) {
        return Decision::SetAside(Why::RefusedName);
    }
    if rel.len() > MAX_PATH_BYTES {
        return Decision::SetAside(Why::PathTooLong);
    }
    Decision::Collect
}

/// Whether git refuses to record a path with the component `name` (git's `verify_path` on
/// Linux, `core.protectNTFS` on as git's default, `core.protectHFS` off): `.`, `..`, `.git`
/// in any case, NTFS aliases of `.git` (`git~1`, trailing dots and spaces, a `:` stream)
/// also after a backslash, and, for a link (`link`), `.gitmodules` and its NTFS aliases.
pub fn git_refuses(name: &[u8], link: bool) -> bool {
    if let Some(rest) = name.strip_prefix(b".") {
        if rest.is_empty() || rest == b"." {
            return true;
        }
        if rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(b"git") {
            if rest.len() == 3 {
                return true;
            }
            if link && rest[3..].eq_ignore_ascii_case(b"modules") {
                return true;
            }
        }
    }
    let ntfs = |s: &[u8]| ntfs_dotgit(s) || (link && ntfs_dot_generic(s, b"gitmodules", b"gi7eba"));
    if ntfs(name) {
        return true;
    }
    name.iter()
        .enumerate()
        .any(|(i, b)| *b == b'\\' && ntfs(&name[i + 1..]))
}

/// Only `.` and ` ` until the end of the component (or a `:` stream name, a separator).
fn only_dots_and_spaces(rest: &[u8]) -> bool {
    for &c in rest {
        if c == b':' || c == b'/' || c == b'\\' {
            return true;
        }
        if c != b'.' && c != b' ' {
            return false;
        }
    }
    true
}

/// git's `is_ntfs_dotgit`: `.git` or `git~1` (any case), then only dots and spaces.
fn ntfs_dotgit(s: &[u8]) -> bool {
    let rest = if s.len() >= 4 && s[0] == b'.' && s[1..4].eq_ignore_ascii_case(b"git") {
        &s[4..]
    } else if s.len() >= 5 && s[..3].eq_ignore_ascii_case(b"git") && &s[3..5] == b"~1" {
        &s[5..]
    } else {
        return false;
    };
    only_dots_and_spaces(rest)
}

/// git's `is_ntfs_dot_generic` for `.gitmodules`: the name, its 8.3 short name (`gitmod~1`
/// to `~4`) or a fallback short name (`gi7eba~N`), then only dots and spaces.
fn ntfs_dot_generic(s: &[u8], dotgit: &[u8], short_prefix: &[u8]) -> bool {
    let end = |rest: &[u8]| {
        rest.iter().all(|c| *c == b' ' || *c == b'.') || {
            let stop = rest.iter().position(|c| *c == b':').unwrap_or(rest.len());
            stop < rest.len() && rest[..stop].iter().all(|c| *c == b' ' || *c == b'.')
        }
    };
    if s.first() == Some(&b'.')
        && s.len() > dotgit.len()
        && s[1..=dotgit.len()].eq_ignore_ascii_case(dotgit)
    {
        return end(&s[dotgit.len() + 1..]);
    }
    if s.len() >= 8
        && s[..6].eq_ignore_ascii_case(&dotgit[..6])
        && s[6] == b'~'
        && (b'1'..=b'4').contains(&s[7])
    {
        return end(&s[8..]);
    }
    // The fallback short name: up to six characters of the prefix, `~`, digits, 8 in all.
    let mut i = 0;
    let mut saw_tilde = false;
    while i < 8 {
        let Some(&c) = s.get(i) else {
            return false;
        };
        if saw_tilde {
            if !c.is_ascii_digit() {
                return false;
            }
        } else if c == b'~' {
            i += 1;
            match s.get(i) {
                Some(d) if (b'1'..=b'9').contains(d) => saw_tilde = true,
                _ => return false,
            }
        } else if i >= 6 || c & 0x80 != 0 || c.to_ascii_lowercase() != short_prefix[i] {
            return false;
        }
        i += 1;
    }
    end(&s[i..])
}

/// A worktree path for the record: printable ASCII as it is, a backslash doubled, and
/// every other byte (control characters, bytes of non-ASCII or invalid UTF-8) as git
/// quotes it: `\n`, `\t`, or `\` and three octal digits.
pub fn quote_path(rel: &[u8]) -> String {
    let mut out = String::with_capacity(rel.len());
    for &b in rel {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out
}

#[cfg(test)]
mod tests;

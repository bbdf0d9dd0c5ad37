//! What of the agent's `/logs` (Harbor's `/logs/agent` and `/logs/artifacts`, under the
//! `container` runtime) is kept with an attempt's artifacts: the rule, applied by the worker
//! when it collects them after the agent ended, whatever the attempt's outcome.
//!
//! Regular files and folders only: a symbolic link is never followed nor kept (it could
//! name a host file, or be followed by whoever reads the results), nor is a FIFO, socket or
//! device; each skipped entry gets a note. Everything collected together is capped
//! ([`CAP_BYTES`]): the file that reaches the cap is truncated there, later files are
//! skipped, each with a note. Files are taken in a fixed order (names sorted, a folder's
//! entries where the folder is), so the same logs keep the same bytes.

/// Bytes of the agent's `/logs` kept per attempt, all files together.
pub const CAP_BYTES: u64 = 256 << 20;

/// An entry as the worker found it (`lstat`: a link is a link).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A folder: its entries are taken in turn.
    Dir,
    /// A regular file of this many bytes.
    File(u64),
    /// A symbolic link.
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// What is done with one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// A folder: made, its entries taken in turn.
    Dir,
    /// A file: its first `bytes` bytes copied (all of it unless the cap was reached).
    Copy {
        /// Bytes copied.
        bytes: u64,
    },
    /// Not kept.
    Skip,
}

/// The cap left and the notes so far, for one attempt's collection.
#[derive(Debug, Clone)]
pub struct Budget {
    left: u64,
    cap: u64,
    notes: Vec<String>,
}

impl Budget {
    /// A budget of `cap` bytes.
    pub fn new(cap: u64) -> Self {
        Self {
            left: cap,
            cap,
            notes: Vec::new(),
        }
    }

    /// What to do with the entry at `rel` (relative to the collected folder, for the note).
    pub fn take(&mut self, rel: &str, kind: Kind) -> Take {
        match kind {
            Kind::Dir => Take::Dir,
            Kind::Symlink => {
                self.notes.push(format!(
                    "skipped `{rel}`: a symbolic link (never followed nor kept)"
                ));
                Take::Skip
            }
            Kind::Other => {
                self.notes.push(format!(
                    "skipped `{rel}`: not a regular file (a FIFO, socket or device)"
                ));
                Take::Skip
            }
            Kind::File(size) if size <= self.left => {
                self.left -= size;
                Take::Copy { bytes: size }
            }
            Kind::File(size) if self.left == 0 => {
                self.notes.push(format!(
                    "skipped `{rel}` ({size} bytes): the cap of {} bytes on the collected logs was reached",
                    self.cap
                ));
                Take::Skip
            }
            Kind::File(size) => {
                let bytes = self.left;
                self.left = 0;
                self.notes.push(format!(
                    "truncated `{rel}` to {bytes} of its {size} bytes: the cap of {} bytes on the collected logs was reached",
                    self.cap
                ));
                Take::Copy { bytes }
            }
        }
    }

    /// The notes so far, one line each.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_special_files_are_skipped_and_the_cap_truncates_then_skips() {
        // (entry, kind, what is taken, the note it leaves: a part of it)
        let cases: &[(&str, Kind, Take, Option<&str>)] = &[
            ("d", Kind::Dir, Take::Dir, None),
            ("d/a", Kind::File(40), Take::Copy { bytes: 40 }, None),
            (
                "link",
                Kind::Symlink,
                Take::Skip,
                Some("`link`: a symbolic link"),
            ),
            (
                "fifo",
                Kind::Other,
                Take::Skip,
                Some("`fifo`: not a regular file"),
            ),
            ("empty", Kind::File(0), Take::Copy { bytes: 0 }, None),
            ("b", Kind::File(50), Take::Copy { bytes: 50 }, None),
            (
                "big",
                Kind::File(30),
                Take::Copy { bytes: 10 },
                Some("truncated `big` to 10 of its 30 bytes: the cap of 100 bytes"),
            ),
            ("zero", Kind::File(0), Take::Copy { bytes: 0 }, None),
            (
                "later",
                Kind::File(1),
                Take::Skip,
                Some("skipped `later` (1 bytes): the cap of 100 bytes"),
            ),
            ("e", Kind::Dir, Take::Dir, None),
        ];
        let mut b = Budget::new(100);
        for (rel, kind, want, note) in cases {
            let before = b.notes().len();
            assert_eq!(b.take(rel, *kind), *want, "{rel}");
            match note {
                None => assert_eq!(b.notes().len(), before, "{rel}: {:?}", b.notes()),
                Some(n) => {
                    assert_eq!(b.notes().len(), before + 1, "{rel}");
                    assert!(
                        b.notes()[before].contains(n),
                        "{rel}: {}",
                        b.notes()[before]
                    );
                }
            }
        }
        assert_eq!(CAP_BYTES, 256 << 20);
    }
}

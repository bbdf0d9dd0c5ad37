//! The trials of a plan file as the text they were written in, split without being parsed.
//!
//! A plan file is canonical JSON whose last member is `trials` (`plan_file`). `run submit`
//! needs only each trial's text: it hashes it under the plan's head and sends it. Parsing every
//! trial into a `PlannedTrial` and writing it back as canonical JSON, only to hash it, was a
//! fifth of the client's CPU in a submit of 1,000,000 trials (docs/performance-notebook.md, "Submit at a
//! million"). [`for_each_text`] lexes the file instead, strings (with their escapes) and
//! nesting only: it finds the document's top-level member `trials` and gives the bytes of each
//! element of its array. It checks the shape it relies on (an array, no element empty or over
//! [`MAX_TRIAL_BYTES`], nothing after it but the document's `}`); the caller's digest over the
//! texts is what proves each is the canonical JSON the plan was sealed with, byte for byte.

use std::io::{BufRead, ErrorKind};

/// The largest trial text read (a planned trial is about 1 KiB).
pub const MAX_TRIAL_BYTES: usize = 1 << 20;

/// Why a plan file's trials could not be read.
#[derive(Debug)]
pub enum ScanError {
    /// Reading the file failed.
    Io(std::io::Error),
    /// The file is not a plan document of the shape described in the module docs.
    Shape(String),
}

impl From<std::io::Error> for ScanError {
    fn from(e: std::io::Error) -> Self {
        ScanError::Io(e)
    }
}

fn shape(problem: impl Into<String>) -> ScanError {
    ScanError::Shape(problem.into())
}

/// Gives the text of each trial of the plan document read from `input`, in order, to `each`
/// until it returns false. Returns false when `each` stopped the read, true when every trial
/// was given and the document ended.
pub fn for_each_text(
    input: &mut impl BufRead,
    each: &mut dyn FnMut(&[u8]) -> bool,
) -> Result<bool, ScanError> {
    find_trials(input)?;
    if !split_trials(input, each)? {
        return Ok(false);
    }
    end_of_document(input)?;
    Ok(true)
}

/// Where a byte stands with respect to the strings of a JSON text.
#[derive(Clone, Copy, PartialEq, Eq)]
enum InString {
    /// Outside every string (a `"` opens one: [`Strings::open`]).
    No,
    /// Inside one, escapes included.
    Yes,
    /// The closing quote.
    Ended,
}

/// The string state of a lexer: inside a string or not, and after a backslash.
#[derive(Default)]
struct Strings {
    inside: bool,
    escaped: bool,
}

impl Strings {
    /// Takes the next byte.
    fn take(&mut self, b: u8) -> InString {
        if !self.inside {
            return InString::No;
        }
        if self.escaped {
            self.escaped = false;
        } else if b == b'\\' {
            self.escaped = true;
        } else if b == b'"' {
            self.inside = false;
            return InString::Ended;
        }
        InString::Yes
    }

    /// A `"` outside every string opens one.
    fn open(&mut self) {
        self.inside = true;
    }
}

/// Where the head's lexer stands after the top-level key `trials`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AfterKey {
    /// Not after it.
    No,
    /// Its `:` is next.
    Colon,
    /// Its value is next.
    Value,
}

/// Reads `input` up to and including the `[` that opens the top-level `trials` array.
fn find_trials(input: &mut impl BufRead) -> Result<(), ScanError> {
    let mut depth = 0u32;
    let mut strings = Strings::default();
    // A top-level key is being read into `key` (its first 8 bytes are enough to tell).
    let (mut expect_key, mut in_key) = (false, false);
    let mut key = Vec::with_capacity(8);
    let mut after = AfterKey::No;
    loop {
        let (used, found) = {
            let buf = fill(input)?;
            if buf.is_empty() {
                return Err(shape("it has no trials"));
            }
            let mut found = false;
            let mut used = 0;
            for &b in buf {
                used += 1;
                match strings.take(b) {
                    InString::Yes => {
                        if in_key && key.len() < 8 {
                            key.push(b);
                        }
                        continue;
                    }
                    InString::Ended => {
                        if in_key && key == b"trials" {
                            after = AfterKey::Colon;
                        }
                        in_key = false;
                        continue;
                    }
                    InString::No => {}
                }
                if b.is_ascii_whitespace() {
                    continue;
                }
                match (after, b) {
                    (AfterKey::Colon, b':') => {
                        after = AfterKey::Value;
                        continue;
                    }
                    (AfterKey::Value, b'[') => {
                        found = true;
                        break;
                    }
                    (AfterKey::Value, _) => return Err(shape("its trials are not an array")),
                    _ => {}
                }
                match b {
                    b'"' => {
                        strings.open();
                        in_key = expect_key && depth == 1;
                        key.clear();
                        expect_key = false;
                    }
                    b'{' | b'[' => {
                        depth += 1;
                        expect_key = b == b'{' && depth == 1;
                    }
                    b'}' | b']' => {
                        depth = depth
                            .checked_sub(1)
                            .filter(|d| *d > 0)
                            .ok_or_else(|| shape("it has no trials"))?;
                    }
                    b',' => expect_key = depth == 1,
                    _ => {}
                }
            }
            (used, found)
        };
        input.consume(used);
        if found {
            return Ok(());
        }
    }
}

/// Reads the elements of the `trials` array (its `[` read) up to and including its `]`,
/// giving each to `each`; false when `each` stopped the read.
fn split_trials(
    input: &mut impl BufRead,
    each: &mut dyn FnMut(&[u8]) -> bool,
) -> Result<bool, ScanError> {
    // The current trial's bytes when it spans reads; empty while it lies in one buffer.
    let mut held: Vec<u8> = Vec::new();
    let mut depth = 0u32;
    let mut strings = Strings::default();
    let mut count = 0u64;
    // Gives one trial, `tail` being its bytes in the current buffer.
    let mut give = |held: &mut Vec<u8>, tail: &[u8], count: &mut u64| -> Result<bool, ScanError> {
        let text = if held.is_empty() {
            tail
        } else {
            held.extend_from_slice(tail);
            held.as_slice()
        };
        if text.is_empty() {
            return Err(shape(format!("trial {count} is empty")));
        }
        if text.len() > MAX_TRIAL_BYTES {
            return Err(shape(format!(
                "trial {count} is over {MAX_TRIAL_BYTES} bytes"
            )));
        }
        *count += 1;
        let go_on = each(text);
        held.clear();
        Ok(go_on)
    };
    loop {
        let (used, closed) = {
            let buf = fill(input)?;
            if buf.is_empty() {
                return Err(shape(format!(
                    "its trials end after {count} without closing the array"
                )));
            }
            let (mut start, mut i) = (0, 0);
            let mut closed = false;
            while i < buf.len() {
                let b = buf[i];
                i += 1;
                if strings.take(b) != InString::No {
                    continue;
                }
                match b {
                    b'"' => strings.open(),
                    b'{' | b'[' => depth += 1,
                    b'}' => {
                        depth = depth
                            .checked_sub(1)
                            .ok_or_else(|| shape(format!("trial {count} is not JSON")))?;
                    }
                    b']' if depth > 0 => depth -= 1,
                    b']' => {
                        let last = &buf[start..i - 1];
                        // `[]`: a plan with no trials.
                        let none = count == 0 && held.is_empty() && last.is_empty();
                        if !(none || give(&mut held, last, &mut count)?) {
                            return Ok(false);
                        }
                        closed = true;
                        break;
                    }
                    b',' if depth == 0 => {
                        if !give(&mut held, &buf[start..i - 1], &mut count)? {
                            return Ok(false);
                        }
                        start = i;
                    }
                    _ => {}
                }
            }
            if !closed {
                held.extend_from_slice(&buf[start..]);
                if held.len() > MAX_TRIAL_BYTES {
                    return Err(shape(format!(
                        "trial {count} is over {MAX_TRIAL_BYTES} bytes"
                    )));
                }
            }
            (i, closed)
        };
        input.consume(used);
        if closed {
            return Ok(true);
        }
    }
}

/// Reads what follows the `trials` array: the document's `}`, then nothing but whitespace.
fn end_of_document(input: &mut impl BufRead) -> Result<(), ScanError> {
    let mut closed = false;
    loop {
        let buf = fill(input)?;
        if buf.is_empty() {
            return if closed {
                Ok(())
            } else {
                Err(shape("its document is not closed after its trials"))
            };
        }
        for &b in buf {
            match b {
                b'}' if !closed => closed = true,
                _ if b.is_ascii_whitespace() => {}
                _ => {
                    return Err(shape(
                        "something follows its trials (they are its last member)",
                    ))
                }
            }
        }
        let n = buf.len();
        input.consume(n);
    }
}

/// `fill_buf`, retried when interrupted.
fn fill(input: &mut impl BufRead) -> Result<&[u8], ScanError> {
    loop {
        match input.fill_buf() {
            Ok(_) => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(input.fill_buf()?)
}

#[cfg(test)]
#[path = "trial_texts_tests.rs"]
mod tests;

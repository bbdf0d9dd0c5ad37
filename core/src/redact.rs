//! Credential scrubbing: every stored byte an attempt produces (agent logs, the agent's diff,
//! the evaluator's output and report, the record's free text, the artifacts it collects)
//! has each declared credential value replaced by `[REDACTED:<NAME>]`, and the names found
//! are reported so the record can say that something was redacted.
//!
//! A value is also found in its common encodings ([`encoded_forms`]): reversed, rot13, hex
//! (lower and upper case), percent-encoded, base64 (standard and URL-safe) and base32 (RFC
//! 4648, upper and lower case, with or without padding) at each alignment a value can have
//! inside a longer encoded text, and split by a separator ([`SEPARATORS`]) every 1 to 4
//! characters ([`SPLIT_GROUPS`]), so a credential embedded in an encoded blob is cut out of
//! it too.
//!
//! Every form of every value is searched for in one pass (leftmost, longest match first).
//! [`Scrubber`] does it over a stream in pieces of any size, in memory bounded by the piece
//! and the longest form: it holds back the last `longest form - 1` bytes of each piece, so a
//! value cut by a piece boundary is still found.
//!
//! What no scrubber can catch (the record's `redacted` cannot say it is absent): a value
//! compressed (gzip, zstd), encrypted or XOR-ed with any key, hashed, encoded twice or in
//! an encoding not listed here (base58, base85, octal, a custom alphabet), split by other
//! separators or at irregular places, spread across files or runs, or given out one piece
//! at a time (its length, its characters by position).

use aho_corasick::{AhoCorasick, MatchKind};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeSet;

/// The credential values of one attempt, by name.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Every form of every value, searched for at once; `None` when there is none.
    matcher: Option<AhoCorasick>,
    /// The name of each form, by pattern id.
    names: Vec<String>,
    /// Bytes of the longest form.
    longest: usize,
}

/// The text a value is replaced with.
pub fn marker(name: &str) -> String {
    format!("[REDACTED:{name}]")
}

impl Redactor {
    /// A redactor for `(name, value)` pairs; empty values are ignored.
    pub fn new(secrets: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut forms: Vec<(String, String)> = Vec::new();
        for (name, value) in secrets.into_iter().filter(|(_, v)| !v.is_empty()) {
            for f in encoded_forms(&value) {
                if !forms.iter().any(|(_, v)| *v == f) {
                    forms.push((name.clone(), f));
                }
            }
        }
        if forms.is_empty() {
            return Self::default();
        }
        // Building fails only past the matcher's own limits (billions of patterns, or
        // gigabytes of them), never with an attempt's credentials; if it ever did, the
        // attempt must stop, not store unscrubbed text.
        let matcher = Some(
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(forms.iter().map(|(_, f)| f.as_bytes()))
                .expect("the credentials' forms make a matcher"),
        );
        Self {
            longest: forms.iter().map(|(_, f)| f.len()).max().unwrap_or(0),
            names: forms.into_iter().map(|(n, _)| n).collect(),
            matcher,
        }
    }

    /// True when there is nothing to scrub.
    pub fn is_empty(&self) -> bool {
        self.matcher.is_none()
    }

    /// Bytes of the longest form searched for: a stream is held back by one less than this
    /// at each piece's end.
    pub fn longest(&self) -> usize {
        self.longest
    }

    /// `input` with every value replaced, or `None` when no value occurs in it; the names of
    /// the values found are added to `found`.
    pub fn bytes(&self, input: &[u8], found: &mut BTreeSet<String>) -> Option<Vec<u8>> {
        let matcher = self.matcher.as_ref()?;
        matcher.find(input)?;
        let mut out = Vec::with_capacity(input.len());
        let mut s = self.scrubber();
        s.push(input, &mut out);
        s.finish(&mut out);
        found.extend(s.found);
        Some(out)
    }

    /// A scrubber for one stream.
    pub fn scrubber(&self) -> Scrubber<'_> {
        Scrubber {
            redactor: self,
            held: Vec::new(),
            found: BTreeSet::new(),
        }
    }

    /// Scrubs a string in place.
    pub fn text(&self, s: &mut String, found: &mut BTreeSet<String>) {
        if let Some(out) = self.bytes(s.as_bytes(), found) {
            // Values and markers are whole UTF-8 strings, so the result is UTF-8.
            *s = String::from_utf8_lossy(&out).into_owned();
        }
    }

    /// Scrubs every string inside a serializable value (through its JSON form).
    pub fn value<T: Serialize + DeserializeOwned>(&self, v: &mut T, found: &mut BTreeSet<String>) {
        if self.is_empty() {
            return;
        }
        let Ok(mut json) = serde_json::to_value(&*v) else {
            return;
        };
        let mut here = BTreeSet::new();
        self.json(&mut json, &mut here);
        if here.is_empty() {
            return;
        }
        if let Ok(back) = serde_json::from_value(json) {
            *v = back;
            found.extend(here);
        }
    }

    fn json(&self, v: &mut serde_json::Value, found: &mut BTreeSet<String>) {
        match v {
            serde_json::Value::String(s) => self.text(s, found),
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| self.json(x, found)),
            serde_json::Value::Object(o) => o.values_mut().for_each(|x| self.json(x, found)),
            _ => {}
        }
    }
}

/// Scrubs one stream given in pieces: [`Scrubber::push`] each piece, then
/// [`Scrubber::finish`]. What it writes out is what [`Redactor::bytes`] gives for the whole
/// stream, whatever the pieces; it holds at most `longest form - 1` bytes between pieces.
#[derive(Debug)]
pub struct Scrubber<'a> {
    redactor: &'a Redactor,
    /// The end of the stream so far that a form could still start in.
    held: Vec<u8>,
    found: BTreeSet<String>,
}

impl Scrubber<'_> {
    /// Takes the next piece; appends to `out` what is final.
    pub fn push(&mut self, piece: &[u8], out: &mut Vec<u8>) {
        self.held.extend_from_slice(piece);
        self.emit(false, out);
    }

    /// Ends the stream: appends the rest to `out`.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        self.emit(true, out);
    }

    /// The names of the values found so far.
    pub fn found(&self) -> &BTreeSet<String> {
        &self.found
    }

    fn emit(&mut self, last: bool, out: &mut Vec<u8>) {
        let Some(matcher) = self.redactor.matcher.as_ref() else {
            out.extend_from_slice(&self.held);
            self.held.clear();
            return;
        };
        // A match starting before `safe` lies wholly in `held`, and so does any longer one
        // starting there: it is final. From `safe` on, a form may go on in the next piece.
        let keep = if last {
            0
        } else {
            self.redactor.longest.saturating_sub(1)
        };
        let safe = self.held.len().saturating_sub(keep);
        let mut from = 0;
        for m in matcher.find_iter(&self.held) {
            if m.start() >= safe {
                break;
            }
            out.extend_from_slice(&self.held[from..m.start()]);
            let name = &self.redactor.names[m.pattern().as_usize()];
            out.extend_from_slice(marker(name).as_bytes());
            self.found.insert(name.clone());
            from = m.end();
        }
        let upto = safe.max(from);
        out.extend_from_slice(&self.held[from..upto]);
        self.held.drain(..upto);
    }
}

/// The shortest encoded form searched for: shorter ones (of short values) would match
/// ordinary text by chance.
const MIN_ENCODED: usize = 8;

/// The separators of the split forms: a value with one of these after every
/// [`SPLIT_GROUPS`] characters (`s-k---l-i-v-e`, `sk_-l_iv`, `sk- li ve`) is scrubbed;
/// one separator and one group size per form.
pub const SEPARATORS: [char; 8] = ['-', '_', ' ', '.', ':', ',', '/', '\n'];

/// The group sizes of the split forms: a separator after every 1, 2, 3 or 4 characters.
pub const SPLIT_GROUPS: std::ops::RangeInclusive<usize> = 1..=4;

/// The forms of `value` that are scrubbed: the value itself, then (each when at least
/// [`MIN_ENCODED`] characters long and different from the value) reversed, rot13, hex
/// lower and upper case, percent-encoded (upper and lower case escapes), the characters of
/// its base64 encoding (standard and URL-safe) that depend on the value's bytes only, for
/// each of the three offsets it can start at inside a longer encoded text, the same of its
/// base32 encoding (upper and lower case, five offsets; padding is never part of the
/// characters that depend on the value only, so padded and unpadded texts are both found),
/// and the value with each of [`SEPARATORS`] after every 1 to 4 characters
/// ([`SPLIT_GROUPS`]).
pub fn encoded_forms(value: &str) -> Vec<String> {
    let mut out = vec![value.to_string()];
    let b = value.as_bytes();
    let mut add = |f: String| {
        if f.len() >= MIN_ENCODED && !out.contains(&f) {
            out.push(f);
        }
    };
    add(value.chars().rev().collect());
    add(value.chars().map(rot13).collect());
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    add(hex.to_uppercase());
    add(hex);
    let pct = |upper: bool| -> String {
        b.iter()
            .map(|&x| {
                if x.is_ascii_alphanumeric() || b"-_.~".contains(&x) {
                    char::from(x).to_string()
                } else if upper {
                    format!("%{x:02X}")
                } else {
                    format!("%{x:02x}")
                }
            })
            .collect()
    };
    add(pct(true));
    add(pct(false));
    for alphabet in [B64_STD, B64_URL] {
        for k in 0..3 {
            add(radix_core(b, k, 6, alphabet));
        }
    }
    for k in 0..5 {
        let core = radix_core(b, k, 5, B32);
        add(core.to_lowercase());
        add(core);
    }
    let chars: Vec<char> = value.chars().collect();
    for sep in SEPARATORS {
        for g in SPLIT_GROUPS {
            if chars.len() > g {
                let parts: Vec<String> = chars.chunks(g).map(|c| c.iter().collect()).collect();
                add(parts.join(&sep.to_string()));
            }
        }
    }
    out
}

fn rot13(c: char) -> char {
    match c {
        'a'..='z' => char::from((c as u8 - b'a' + 13) % 26 + b'a'),
        'A'..='Z' => char::from((c as u8 - b'A' + 13) % 26 + b'A'),
        _ => c,
    }
}

const B64_STD: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64_URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const B32: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// The characters of a `bits`-bit-per-character encoding (`alphabet`: base64, base32) of
/// `value` placed `k` bytes into a group that depend on `value`'s bytes only (the groups of
/// `bits` bits wholly inside it).
fn radix_core(value: &[u8], k: usize, bits: usize, alphabet: &[u8]) -> String {
    let mut bytes = vec![0u8; k];
    bytes.extend_from_slice(value);
    let bit = |i: usize| -> u8 { (bytes[i / 8] >> (7 - i % 8)) & 1 };
    let (start, end) = (8 * k, 8 * (k + value.len()));
    let first = start.div_ceil(bits);
    let last = end / bits; // exclusive
    (first..last)
        .map(|c| {
            let v = (0..bits).fold(0usize, |acc, j| (acc << 1) | usize::from(bit(bits * c + j)));
            char::from(alphabet[v])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r() -> Redactor {
        Redactor::new([
            ("API_KEY".to_string(), "sk-abc123".to_string()),
            ("LONG".to_string(), "sk-abc123-and-more".to_string()),
            ("EMPTY".to_string(), String::new()),
        ])
    }

    #[test]
    fn scrubs_bytes_and_reports_names() {
        let cases: &[(&str, Option<&str>, &[&str])] = &[
            ("nothing here", None, &[]),
            (
                "key=sk-abc123",
                Some("key=[REDACTED:API_KEY]"),
                &["API_KEY"],
            ),
            (
                "sk-abc123sk-abc123",
                Some("[REDACTED:API_KEY][REDACTED:API_KEY]"),
                &["API_KEY"],
            ),
            (
                "a sk-abc123-and-more b sk-abc123",
                Some("a [REDACTED:LONG] b [REDACTED:API_KEY]"),
                &["API_KEY", "LONG"],
            ),
            ("sk-abc12", None, &[]),
            ("", None, &[]),
            ("+sk-abc123\n", Some("+[REDACTED:API_KEY]\n"), &["API_KEY"]),
        ];
        for (input, want, names) in cases {
            let mut found = BTreeSet::new();
            let got = r().bytes(input.as_bytes(), &mut found);
            assert_eq!(
                got.as_deref().map(|b| std::str::from_utf8(b).unwrap()),
                *want,
                "{input}"
            );
            let names: BTreeSet<String> = names.iter().map(|s| s.to_string()).collect();
            assert_eq!(found, names, "{input}");
        }
    }

    #[test]
    fn scrubs_every_string_of_a_value() {
        #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
        struct V {
            a: String,
            b: Vec<Option<String>>,
            n: u32,
        }
        let mut v = V {
            a: "quote \" sk-abc123 \\ ".into(),
            b: vec![None, Some("x sk-abc123-and-more".into())],
            n: 7,
        };
        let mut found = BTreeSet::new();
        r().value(&mut v, &mut found);
        assert_eq!(v.a, "quote \" [REDACTED:API_KEY] \\ ");
        assert_eq!(v.b[1].as_deref(), Some("x [REDACTED:LONG]"));
        assert_eq!(v.n, 7);
        assert_eq!(found.len(), 2);
        assert!(Redactor::new([("E".to_string(), String::new())]).is_empty());
    }

    /// Standard base64 of `b` (with padding), for the tests.
    fn b64(b: &[u8], alphabet: &[u8]) -> String {
        let mut out = String::new();
        for chunk in b.chunks(3) {
            let n = chunk.len();
            let v = (u32::from(chunk[0]) << 16)
                | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
                | u32::from(*chunk.get(2).unwrap_or(&0));
            for i in 0..4 {
                if i <= n {
                    out.push(char::from(alphabet[((v >> (18 - 6 * i)) & 63) as usize]));
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    #[test]
    fn encoded_forms_are_scrubbed_too() {
        let secret = "sk-live/9f8e+7d6c?5b4a";
        let red = Redactor::new([("KEY".to_string(), secret.to_string())]);
        let hex: String = secret.bytes().map(|x| format!("{x:02x}")).collect();
        let mut cases: Vec<(String, &str)> = vec![
            (format!("x {secret} y"), "literal"),
            (
                format!("x {} y", secret.chars().rev().collect::<String>()),
                "reversed",
            ),
            (format!("h={hex};"), "hex lower"),
            (format!("H={};", hex.to_uppercase()), "hex upper"),
            (
                "q=sk-live%2F9f8e%2B7d6c%3F5b4a&".to_string(),
                "percent upper",
            ),
            (
                "q=sk-live%2f9f8e%2b7d6c%3f5b4a&".to_string(),
                "percent lower",
            ),
        ];
        for prefix in ["", "a", "ab", "abc", "Authorization: Basic "] {
            for (alphabet, what) in [(B64_STD, "base64"), (B64_URL, "base64url")] {
                let blob = format!("{prefix}{secret}:tail-bytes");
                cases.push((format!("blob {} end", b64(blob.as_bytes(), alphabet)), what));
            }
        }
        for (input, what) in &cases {
            let mut found = BTreeSet::new();
            let out = red.bytes(input.as_bytes(), &mut found);
            let out =
                String::from_utf8(out.unwrap_or_else(|| panic!("{what}: not found in {input}")))
                    .unwrap();
            assert!(out.contains("[REDACTED:KEY]"), "{what}: {out}");
            assert_eq!(found.len(), 1, "{what}");
            // Nothing of the encoded value is left that decodes to more than a few bytes.
            for f in encoded_forms(secret) {
                assert!(!out.contains(&f), "{what}: {f} left in {out}");
            }
        }
        // Ordinary text, and the encodings of another value, are left alone.
        let mut found = BTreeSet::new();
        let other = b64(b"sk-live/0000+0000?0000", B64_STD);
        assert_eq!(
            red.bytes(format!("nothing {other} here").as_bytes(), &mut found),
            None
        );
        // Short values are scrubbed only literally (their encodings would match by chance).
        assert_eq!(encoded_forms("ab"), vec!["ab".to_string()]);
    }

    /// RFC 4648 base32 of `b` (upper case), with or without its `=` padding, for the tests.
    fn b32(b: &[u8], pad: bool) -> String {
        const A: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
        let mut out = String::new();
        for chunk in b.chunks(5) {
            let mut g = [0u8; 5];
            g[..chunk.len()].copy_from_slice(chunk);
            let v = g.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x));
            let chars = (chunk.len() * 8).div_ceil(5);
            for i in 0..8 {
                if i < chars {
                    out.push(char::from(A[((v >> (35 - 5 * i)) & 31) as usize]));
                } else if pad {
                    out.push('=');
                }
            }
        }
        out
    }

    fn rot13(s: &str) -> String {
        s.chars()
            .map(|c| match c {
                'a'..='z' => char::from((c as u8 - b'a' + 13) % 26 + b'a'),
                'A'..='Z' => char::from((c as u8 - b'A' + 13) % 26 + b'A'),
                _ => c,
            })
            .collect()
    }

    /// base32 (upper and lower case, padded or not, at every offset in a longer text),
    /// rot13, and the value split by a separator every 1 to 4 characters are scrubbed;
    /// before, each of them survived.
    #[test]
    fn base32_rot13_and_separator_split_forms_are_scrubbed() {
        let secret = "sk-live/9f8e+7d6c?5b4a";
        let red = Redactor::new([("KEY".to_string(), secret.to_string())]);
        let mut cases: Vec<(String, String)> = Vec::new();
        for prefix in ["", "a", "ab", "abc", "abcd", "token="] {
            for pad in [true, false] {
                let blob = b32(format!("{prefix}{secret}:tail").as_bytes(), pad);
                cases.push((
                    format!("x {blob} y"),
                    format!("base32 {prefix:?} pad={pad}"),
                ));
                cases.push((
                    format!("x {} y", blob.to_lowercase()),
                    format!("base32 lower {prefix:?} pad={pad}"),
                ));
            }
            // The value alone, the padding included.
            cases.push((
                format!("x {} y", b32(secret.as_bytes(), true)),
                "base32 alone".into(),
            ));
        }
        cases.push((format!("x {} y", rot13(secret)), "rot13".into()));
        let chars: Vec<char> = secret.chars().collect();
        for sep in SEPARATORS {
            for g in SPLIT_GROUPS {
                let split = chars
                    .chunks(g)
                    .map(|c| c.iter().collect::<String>())
                    .collect::<Vec<_>>()
                    .join(&sep.to_string());
                cases.push((
                    format!("x {split} y"),
                    format!("split by {sep:?} every {g}"),
                ));
            }
        }
        for (input, what) in &cases {
            let mut found = BTreeSet::new();
            let out = red
                .bytes(input.as_bytes(), &mut found)
                .unwrap_or_else(|| panic!("{what}: not found in {input}"));
            let out = String::from_utf8(out).unwrap();
            assert!(out.contains("[REDACTED:KEY]"), "{what}: {out}");
            assert_eq!(found.len(), 1, "{what}");
            for f in encoded_forms(secret) {
                assert!(!out.contains(&f), "{what}: {f} left in {out}");
            }
        }
        // The base32 of another value, and ordinary text, are left alone.
        let mut found = BTreeSet::new();
        let other = b32(b"sk-live/0000+0000?0000", true);
        assert_eq!(
            red.bytes(
                format!("nothing {other} - here . a b c").as_bytes(),
                &mut found
            ),
            None
        );
    }

    /// A stream scrubbed in pieces of any size gives what the whole gives: a value cut by a
    /// piece boundary is found, and at most `longest form - 1` bytes are held back.
    #[test]
    fn a_stream_in_pieces_is_scrubbed_as_a_whole() {
        let red = r();
        let text = "start sk-abc123 mid sk-abc123-and-more 736b2d616263313233 s-k---a-b-c-1-2-3 \
                    sk-abc12 tail sk-abc123";
        let want = red.bytes(text.as_bytes(), &mut BTreeSet::new()).unwrap();
        let want = String::from_utf8(want).unwrap();
        assert_eq!(want.matches("[REDACTED:").count(), 5, "{want}");
        for size in [1, 2, 3, 5, 7, 8, 13, 64, 1000] {
            let mut s = red.scrubber();
            let mut out = Vec::new();
            for piece in text.as_bytes().chunks(size) {
                s.push(piece, &mut out);
                assert!(
                    s.held.len() < red.longest(),
                    "{size}: held {}",
                    s.held.len()
                );
            }
            s.finish(&mut out);
            assert_eq!(String::from_utf8(out).unwrap(), want, "pieces of {size}");
            let names: Vec<&str> = s.found().iter().map(String::as_str).collect();
            assert_eq!(names, ["API_KEY", "LONG"], "pieces of {size}");
        }
        // Nothing to scrub: the stream goes through unchanged and nothing is held.
        let none = Redactor::default();
        let mut s = none.scrubber();
        let mut out = Vec::new();
        s.push(b"abc", &mut out);
        assert_eq!(out, b"abc");
        s.finish(&mut out);
        assert_eq!(out, b"abc");
    }
}

//! Credential scrubbing: every stored byte an attempt produces (agent logs, the agent's diff,
//! the evaluator's output and report, the record's free text) has each declared credential
//! value replaced by `[REDACTED:<NAME>]`, and the names found are reported so the record can
//! say that something was redacted.
//!
//! A value is also found in its common encodings ([`encoded_forms`]): reversed, hex (lower
//! and upper case), percent-encoded, and base64 (standard and URL-safe) at each of the three
//! alignments a value can have inside a longer base64 text, so a credential embedded in an
//! encoded blob is cut out of it too.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeSet;

/// The credential values of one attempt, by name.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// (name, value), longest value first (a value containing another is replaced whole).
    secrets: Vec<(String, String)>,
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
        forms.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
        Self { secrets: forms }
    }

    /// True when there is nothing to scrub.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `input` with every value replaced, or `None` when no value occurs in it; the names of
    /// the values found are added to `found`.
    pub fn bytes(&self, input: &[u8], found: &mut BTreeSet<String>) -> Option<Vec<u8>> {
        let mut current: Option<Vec<u8>> = None;
        for (name, value) in &self.secrets {
            let text = current.as_deref().unwrap_or(input);
            if let Some(out) = replace_all(text, value.as_bytes(), marker(name).as_bytes()) {
                found.insert(name.clone());
                current = Some(out);
            }
        }
        current
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

/// The shortest encoded form searched for: shorter ones (of short values) would match
/// ordinary text by chance.
const MIN_ENCODED: usize = 8;

/// The forms of `value` that are scrubbed: the value itself, then (each when at least
/// [`MIN_ENCODED`] characters long and different from the value) reversed, hex lower and
/// upper case, percent-encoded (upper and lower case escapes), and the characters of its
/// base64 encoding (standard and URL-safe) that depend on the value's bytes only, for each
/// of the three offsets it can start at inside a longer encoded text.
pub fn encoded_forms(value: &str) -> Vec<String> {
    let mut out = vec![value.to_string()];
    let b = value.as_bytes();
    let mut add = |f: String| {
        if f.len() >= MIN_ENCODED && !out.contains(&f) {
            out.push(f);
        }
    };
    add(value.chars().rev().collect());
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
            add(base64_core(b, k, alphabet));
        }
    }
    out
}

const B64_STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64_URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The base64 characters of `value` placed `k` bytes into a 3-byte group that depend on
/// `value`'s bytes only (the 6-bit groups wholly inside it).
fn base64_core(value: &[u8], k: usize, alphabet: &[u8; 64]) -> String {
    let mut bytes = vec![0u8; k];
    bytes.extend_from_slice(value);
    bytes.extend_from_slice(&[0, 0]);
    let bits = |i: usize| -> u8 {
        let (byte, bit) = (i / 8, i % 8);
        (bytes[byte] >> (7 - bit)) & 1
    };
    let (start, end) = (8 * k, 8 * (k + value.len()));
    let first = start.div_ceil(6);
    let last = end / 6; // exclusive
    (first..last)
        .map(|c| {
            let v = (0..6).fold(0u8, |acc, j| (acc << 1) | bits(6 * c + j));
            char::from(alphabet[usize::from(v)])
        })
        .collect()
}

/// `text` with every occurrence of `needle` replaced, or `None` when there is none.
fn replace_all(text: &[u8], needle: &[u8], with: &[u8]) -> Option<Vec<u8>> {
    let first = find(text, needle, 0)?;
    let mut out = Vec::with_capacity(text.len());
    let mut from = 0;
    let mut at = Some(first);
    while let Some(i) = at {
        out.extend_from_slice(&text[from..i]);
        out.extend_from_slice(with);
        from = i + needle.len();
        at = find(text, needle, from);
    }
    out.extend_from_slice(&text[from..]);
    Some(out)
}

fn find(text: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || from >= text.len() {
        return None;
    }
    let first = needle[0];
    let mut i = from;
    while i + needle.len() <= text.len() {
        match text[i..=text.len() - needle.len()]
            .iter()
            .position(|b| *b == first)
        {
            None => return None,
            Some(p) => {
                let at = i + p;
                if text[at..].starts_with(needle) {
                    return Some(at);
                }
                i = at + 1;
            }
        }
    }
    None
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
    fn b64(b: &[u8], alphabet: &[u8; 64]) -> String {
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
}

//! Credential scrubbing: every stored byte an attempt produces (agent logs, the agent's diff,
//! the evaluator's output and report, the record's free text) has each declared credential
//! value replaced by `[REDACTED:<NAME>]`, and the names found are reported so the record can
//! say that something was redacted.

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
        let mut secrets: Vec<_> = secrets.into_iter().filter(|(_, v)| !v.is_empty()).collect();
        secrets.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
        Self { secrets }
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
}

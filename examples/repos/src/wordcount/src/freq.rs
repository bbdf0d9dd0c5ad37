//! Word frequencies.

use std::collections::BTreeMap;

/// Normalizes a word for counting: lowercases it and strips leading and trailing
/// punctuation, keeping inner apostrophes and hyphens (`"Don't!"` -> `"don't"`,
/// `"(well-known)"` -> `"well-known"`). Returns `None` when nothing is left.
pub fn normalize_word(word: &str) -> Option<String> {
    let trimmed = word.trim_matches(|c: char| !c.is_alphanumeric());
    if trimmed.is_empty() {
        None
    } else {
        Some(trimmed.to_lowercase())
    }
}

/// How many times each normalized word occurs in `text`.
pub fn word_frequencies(text: &str) -> BTreeMap<String, usize> {
    let mut freq = BTreeMap::new();
    for w in text.split_whitespace().filter_map(normalize_word) {
        *freq.entry(w).or_insert(0) += 1;
    }
    freq
}

/// The `n` most frequent words of `text`, most frequent first; words with the same
/// count are in alphabetical order, so the result is deterministic.
pub fn top_n(text: &str, n: usize) -> Vec<(String, usize)> {
    let mut entries: Vec<(String, usize)> = word_frequencies(text).into_iter().collect();
    entries.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    entries.truncate(n);
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_case_and_punctuation() {
        assert_eq!(normalize_word("Hello,"), Some("hello".to_string()));
        assert_eq!(normalize_word("Don't!"), Some("don't".to_string()));
        assert_eq!(normalize_word("(well-known)"), Some("well-known".to_string()));
        assert_eq!(normalize_word("--"), None);
    }

    #[test]
    fn counts_words() {
        let f = word_frequencies("The cat saw the other cat. THE END");
        assert_eq!(f["the"], 3);
        assert_eq!(f["cat"], 2);
        assert_eq!(f["end"], 1);
        assert_eq!(f.len(), 5);
    }

    #[test]
    fn top_words_by_count() {
        let top = top_n("b b b a a c", 2);
        assert_eq!(top, vec![("b".to_string(), 3), ("a".to_string(), 2)]);
    }

    #[test]
    fn top_of_empty_text() {
        assert!(top_n("", 3).is_empty());
        assert!(top_n("a b", 0).is_empty());
    }
}

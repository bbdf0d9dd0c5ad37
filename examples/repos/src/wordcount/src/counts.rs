//! `wc`-like counts.

/// Summary statistics of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Number of lines (see [`count_lines`]).
    pub lines: usize,
    /// Number of words (see [`count_words`]).
    pub words: usize,
    /// Number of Unicode scalar values.
    pub chars: usize,
    /// Number of sentences (see [`count_sentences`]).
    pub sentences: usize,
}

impl Stats {
    /// Computes every statistic of `text`.
    pub fn of(text: &str) -> Stats {
        Stats {
            lines: count_lines(text),
            words: count_words(text),
            chars: count_chars(text),
            sentences: count_sentences(text),
        }
    }

    /// Average number of words per sentence, or 0.0 for a text without sentences.
    pub fn words_per_sentence(&self) -> f64 {
        if self.sentences == 0 {
            0.0
        } else {
            self.words as f64 / self.sentences as f64
        }
    }
}

/// Number of lines in `text`.
///
/// Every `\n` ends a line, and a last line without a trailing newline still counts:
/// `"a\nb"` has two lines, `"a\nb\n"` has two lines, `""` has none. A `\r\n` pair counts
/// once.
pub fn count_lines(text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    let newlines = text.bytes().filter(|&b| b == b'\n').count();
    if text.ends_with('\n') {
        newlines
    } else {
        newlines + 1
    }
}

/// Number of words: maximal runs of non-whitespace characters.
pub fn count_words(text: &str) -> usize {
    text.split_whitespace().count()
}

/// Number of characters (Unicode scalar values, not bytes).
pub fn count_chars(text: &str) -> usize {
    text.chars().count()
}

/// Number of sentences: runs of text ending with `.`, `!` or `?` (a run of several
/// terminators such as `?!` or `...` ends one sentence), plus a trailing run of words
/// without a terminator.
pub fn count_sentences(text: &str) -> usize {
    let mut sentences = 0;
    let mut in_sentence = false;
    for c in text.chars() {
        if matches!(c, '.' | '!' | '?') {
            if in_sentence {
                sentences += 1;
                in_sentence = false;
            }
        } else if c.is_alphanumeric() {
            in_sentence = true;
        }
    }
    if in_sentence {
        sentences += 1;
    }
    sentences
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_text_has_nothing() {
        assert_eq!(Stats::of(""), Stats::default());
    }

    #[test]
    fn lines_with_trailing_newline() {
        assert_eq!(count_lines("a\n"), 1);
        assert_eq!(count_lines("a\nb\n"), 2);
        assert_eq!(count_lines("\n\n"), 2);
    }

    #[test]
    fn crlf_counts_once() {
        assert_eq!(count_lines("a\r\nb\r\n"), 2);
    }

    #[test]
    fn words_split_on_any_whitespace() {
        assert_eq!(count_words("  one\ttwo\n three  "), 3);
        assert_eq!(count_words("   "), 0);
    }

    #[test]
    fn chars_are_not_bytes() {
        assert_eq!(count_chars("héllo"), 5);
        assert_eq!(count_chars("日本語"), 3);
    }

    #[test]
    fn sentences() {
        assert_eq!(count_sentences("Hi. How are you? Fine!"), 3);
        assert_eq!(count_sentences("Wait... what?!"), 2);
        assert_eq!(count_sentences("no terminator"), 1);
        assert_eq!(count_sentences("..."), 0);
    }

    #[test]
    fn words_per_sentence() {
        let s = Stats::of("One two. Three four five six.");
        assert_eq!(s.words_per_sentence(), 3.0);
        assert_eq!(Stats::default().words_per_sentence(), 0.0);
    }
}

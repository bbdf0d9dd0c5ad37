//! Small, dependency-free text statistics.
//!
//! * [`counts`]: line, word, character and sentence counts (`wc`-like).
//! * [`freq`]: word frequencies and the most frequent words.
//! * [`wrap`]: greedy word wrapping.
//! * [`truncate`](mod@truncate): shortening text to a number of characters.

pub mod counts;
pub mod freq;
pub mod truncate;
pub mod wrap;

pub use counts::{count_chars, count_lines, count_sentences, count_words, Stats};
pub use freq::{normalize_word, top_n, word_frequencies};
pub use truncate::truncate;
pub use wrap::wrap;

/// Estimated reading time in whole minutes, rounded up, for `words` words read at
/// `words_per_minute`. Zero words take zero minutes; a zero rate is treated as 1.
pub fn reading_minutes(words: usize, words_per_minute: usize) -> usize {
    let wpm = words_per_minute.max(1);
    words.div_ceil(wpm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_time_rounds_up() {
        assert_eq!(reading_minutes(0, 200), 0);
        assert_eq!(reading_minutes(1, 200), 1);
        assert_eq!(reading_minutes(200, 200), 1);
        assert_eq!(reading_minutes(201, 200), 2);
        assert_eq!(reading_minutes(10, 0), 10);
    }
}

//! Greedy word wrapping.

/// Wraps `text` into lines of at most `width` characters, breaking only between words.
///
/// Words are separated by any whitespace; the output lines hold the words separated by
/// single spaces. A word longer than `width` gets a line of its own (it is never split).
/// A `width` of 0 is treated as 1. An empty or all-whitespace text gives no lines.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut line_len = 0;
    for word in text.split_whitespace() {
        let word_len = word.chars().count();
        if line_len == 0 {
            line.push_str(word);
            line_len = word_len;
        } else if line_len + 1 + word_len <= width {
            line.push(' ');
            line.push_str(word);
            line_len += 1 + word_len;
        } else {
            lines.push(std::mem::take(&mut line));
            line.push_str(word);
            line_len = word_len;
        }
    }
    if line_len > 0 {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_between_words() {
        assert_eq!(
            wrap("the quick brown fox jumps", 10),
            vec!["the quick", "brown fox", "jumps"]
        );
    }

    #[test]
    fn long_word_gets_its_own_line() {
        assert_eq!(wrap("a incomprehensibilities b", 5), vec!["a", "incomprehensibilities", "b"]);
    }

    #[test]
    fn empty_text() {
        assert!(wrap("", 10).is_empty());
        assert!(wrap(" \n\t ", 10).is_empty());
    }

    #[test]
    fn collapses_whitespace() {
        assert_eq!(wrap("a   b\n\nc", 80), vec!["a b c"]);
    }
}

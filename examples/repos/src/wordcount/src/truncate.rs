//! Shortening text.

/// The ellipsis appended to truncated text.
pub const ELLIPSIS: char = '…';

/// Shortens `text` to at most `max_chars` characters (Unicode scalar values). Text that
/// already fits is returned unchanged; longer text keeps its first `max_chars - 1`
/// characters followed by [`ELLIPSIS`]. `max_chars == 0` gives an empty string.
pub fn truncate(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    if max_chars == 0 {
        return String::new();
    }
    let cut = text
        .char_indices()
        .nth(max_chars - 1)
        .map(|(i, _)| i)
        .unwrap_or(text.len());
    let mut out = text[..cut].to_string();
    out.push(ELLIPSIS);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_unchanged() {
        assert_eq!(truncate("hello", 5), "hello");
        assert_eq!(truncate("hello", 50), "hello");
        assert_eq!(truncate("", 0), "");
    }

    #[test]
    fn long_text_gets_an_ellipsis() {
        assert_eq!(truncate("hello world", 8), "hello w…");
        assert_eq!(truncate("hello world", 8).chars().count(), 8);
    }

    #[test]
    fn zero_width() {
        assert_eq!(truncate("hello", 0), "");
    }
}

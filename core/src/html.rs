//! HTML escaping, one rule for every page akbench writes (the viewer, the coordinator's
//! status page, `run report --html`): text and quoted attribute values alike.

/// Escapes `s` for HTML text and single- or double-quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::esc;

    #[test]
    fn every_special_character_is_escaped_and_the_rest_kept() {
        assert_eq!(
            esc(r#"<a href="x?a=1&b='2'">é</a>"#),
            "&lt;a href=&quot;x?a=1&amp;b=&#39;2&#39;&quot;&gt;é&lt;/a&gt;"
        );
        assert_eq!(esc("plain text"), "plain text");
        assert_eq!(esc(""), "");
    }
}

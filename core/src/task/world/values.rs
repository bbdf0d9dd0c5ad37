//! The value syntaxes of a compose file that [`super::parse`] reads, as Docker Compose
//! reads them: durations (`1m30s`, `500ms`: Go's `time.ParseDuration`), a command written
//! as one string (split into words without a shell, as compose does), `$` interpolation
//! (refused: akbench fills no variable; `$$` is a literal `$`), and the quoting that turns
//! a healthcheck's `["CMD", ...]` argv into one `sh -c` command. Pure; table-tested in
//! `tests.rs`.

/// A compose duration in seconds: one or more `<number><unit>` with units `ns`, `us`
/// (`µs`), `ms`, `s`, `m`, `h` (`1m30s`, `1.5s`, `500ms`); the error says what is wrong.
pub fn duration_sec(s: &str) -> Result<f64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("is empty".into());
    }
    let mut rest = t;
    let mut total = 0.0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, after) = rest.split_at(num_len);
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(format!(
                "`{t}` is not a duration such as `10s`, `1m30s` or `500ms`"
            ));
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => {
                return Err(format!(
                    "`{t}` has a number without a unit; write it with one, e.g. `{num}s`"
                ))
            }
            other => {
                return Err(format!(
                    "`{t}` has the unknown unit `{}` (the units are ns, us, ms, s, m, h)",
                    crate::limits::elide(other)
                ))
            }
        };
        let n: f64 = num
            .parse()
            .map_err(|_| format!("`{t}` is not a duration such as `10s`"))?;
        total += n * scale;
        rest = next;
    }
    Ok(total)
}

/// A command written as one string, split into words as compose splits it (shell words
/// without a shell: blanks separate words, `'...'` and `"..."` quote, `\` escapes; no
/// variable, glob or operator). An unclosed quote, or an operator (`;`, `&`, `|`, `<`,
/// `>`, a backquote) outside quotes, which compose would silently cut the command at, is
/// an error.
pub fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(n) => cur.push(n),
                    None => return Err("ends with a lone `\\`".into()),
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(n) => cur.push(n),
                        None => return Err("has an unclosed `'`".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(n @ ('"' | '\\' | '$' | '`')) => cur.push(n),
                            Some(n) => {
                                cur.push('\\');
                                cur.push(n);
                            }
                            None => return Err("has an unclosed `\"`".into()),
                        },
                        Some(n) => cur.push(n),
                        None => return Err("has an unclosed `\"`".into()),
                    }
                }
            }
            ';' | '&' | '|' | '<' | '>' | '`' => {
                return Err(format!(
                    "holds the shell operator `{c}` outside quotes, which compose does not run a shell for"
                ))
            }
            other => {
                in_word = true;
                cur.push(other);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// `s` quoted for `sh` so that it is one word with exactly its characters.
pub fn shell_quote(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./=:,@%+".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// An argv as one `sh -c` command that runs exactly it.
pub fn shell_join(argv: &[String]) -> String {
    argv.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A value with compose's interpolation applied: `$$` is a literal `$`; a `${...}` or
/// `$NAME` reference is an error naming it (Harbor fills some variables from its own run
/// and the others from the shell; akbench fills none). A `$` before anything else is kept.
pub fn interpolate(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        match chars.peek().map(|p| p.1) {
            Some('$') => {
                chars.next();
                out.push('$');
            }
            Some('{') => {
                let end = s[i..].find('}').map_or(s.len(), |e| i + e + 1);
                return Err(format!(
                    "references the variable `{}`",
                    crate::limits::elide(&s[i..end])
                ));
            }
            Some(n) if n.is_ascii_alphabetic() || n == '_' => {
                let end = s[i + 1..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .map_or(s.len(), |e| i + 1 + e);
                return Err(format!(
                    "references the variable `{}`",
                    crate::limits::elide(&s[i..end])
                ));
            }
            _ => out.push('$'),
        }
    }
    Ok(out)
}

//! The tripwire twin: a copy of a task's hidden tests with their expected values changed, so
//! that any honest solution fails it (docs/tasks.md, "Grading the agent cannot forge").
//!
//! A solved grade is checked by running the twin in a grading run identical to the graded one.
//! Code that reads what the test expects (its frame, its source file, the test functions
//! through the garbage collector), code that writes the reward, and a patched test runner
//! pass the twin as they passed the real tests; honest code fails it. Whether the twin
//! discriminates is checked on the task's reference solution before anything is flagged
//! (the worker's `evaluator::tripwire`), so an assertion whose change an honest solution
//! survives never accuses it.
//!
//! This module is the pure half: which files are test files ([`test_lang`]), where their
//! assertions' expected values are ([`sites`]), grouped by the test function they are in
//! ([`tests_with_sites`]), and the perturbed text of one test ([`perturb_test`]) or of all
//! ([`perturb`]), with randomness injected. What is perturbed: in each assertion statement (Python `assert`,
//! `self.assertX(...)` / `assertX(...)`, Rust `assert!`, `assert_eq!`, `assert_ne!` and
//! their `debug_` forms), the last literal of the compared part (a Python `assert`'s
//! expression before its message; the first argument of a one-argument unittest assertion
//! or `assert!`; the first two arguments otherwise): a string gets one letter or digit
//! changed (or one letter inserted when it has none), a whole number or the integer part
//! of a float grows by 1 to 9, a boolean flips. Python f-strings and Rust character
//! literals are left alone.

use std::ops::Range;

/// The language of a hidden-tests file the twin knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Python: `test*.py` or `*_test.py` (pytest, unittest).
    Python,
    /// Rust: a `.rs` file with a `#[test]`.
    Rust,
}

/// The language of the tests file named `file_name` (its base name) holding `content`, or
/// `None` when it is not a test file the twin knows (a runner script, a helper, data).
pub fn test_lang(file_name: &str, content: &str) -> Option<Lang> {
    if file_name.ends_with(".py")
        && (file_name.starts_with("test") || file_name.ends_with("_test.py"))
    {
        return Some(Lang::Python);
    }
    if file_name.ends_with(".rs") && content.contains("#[test]") {
        return Some(Lang::Rust);
    }
    None
}

/// What kind of literal a site is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Literal {
    /// A string (any prefix but `f`; its quotes included in the range).
    Str,
    /// A whole number (with a Rust type suffix) or a float.
    Number,
    /// `True` / `False`, `true` / `false`.
    Bool,
}

/// One expected value: its byte range in the file, its kind, and the test it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// Byte range of the literal in the file.
    pub span: Range<usize>,
    /// Its kind.
    pub kind: Literal,
    /// The function the assertion is in (the last `def` / `fn` before it), empty at the top
    /// of the file: the unit a twin changes ([`perturb_test`]).
    pub test: String,
}

/// The perturbed text of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Perturbed {
    /// The file with every site changed.
    pub text: String,
    /// How many expected values were changed.
    pub sites: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Name,
    Str {
        fstring: bool,
    },
    Char,
    Num,
    Op(u8),
    /// The end of a logical line (Python, outside brackets).
    Newline,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    span: Range<usize>,
}

/// The tokens of a file: enough of each language to find strings, comments, numbers,
/// names, brackets and (Python) logical line ends.
fn lex(src: &str, lang: Lang) -> Vec<Token> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut depth: i32 = 0;
    let push = |out: &mut Vec<Token>, tok: Tok, span: Range<usize>| out.push(Token { tok, span });
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                if lang == Lang::Python && depth <= 0 {
                    push(&mut out, Tok::Newline, i..i + 1);
                }
                i += 1;
            }
            b'\\' if lang == Lang::Python && b.get(i + 1) == Some(&b'\n') => i += 2,
            b'#' if lang == Lang::Python => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if lang == Lang::Rust && b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if lang == Lang::Rust && b.get(i + 1) == Some(&b'*') => {
                let mut level = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        level += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        level -= 1;
                        i += 2;
                        if level == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'"' | b'\'' => {
                if lang == Lang::Rust && c == b'\'' {
                    let end = rust_char_end(b, i);
                    push(&mut out, Tok::Char, i..end);
                    i = end;
                } else {
                    let end = string_end(b, i, lang, false);
                    push(&mut out, Tok::Str { fstring: false }, i..end);
                    i = end;
                }
            }
            c if c.is_ascii_digit() => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.')
                {
                    // `1..3` is a range, `x.0` a field: a dot belongs to the number only
                    // when a digit follows it.
                    if b[i] == b'.' && !b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                        break;
                    }
                    let exp = (b[i] == b'e' || b[i] == b'E')
                        && matches!(b.get(i + 1), Some(b'+' | b'-'))
                        && b.get(i + 2).is_some_and(u8::is_ascii_digit);
                    i += if exp { 2 } else { 1 };
                }
                push(&mut out, Tok::Num, start..i);
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80)
                {
                    i += 1;
                }
                let word = &src[start..i];
                let quote = b.get(i).copied();
                let prefix = matches!(quote, Some(b'"' | b'\'')) && is_string_prefix(word, lang);
                let raw_hash =
                    lang == Lang::Rust && matches!(word, "r" | "br" | "cr") && quote == Some(b'#');
                if prefix || raw_hash {
                    let raw = word.contains(['r', 'R']);
                    let end = if lang == Lang::Rust && raw {
                        rust_raw_end(b, i)
                    } else if lang == Lang::Rust && quote == Some(b'\'') {
                        rust_char_end(b, i)
                    } else {
                        string_end(b, i, lang, raw)
                    };
                    let tok = if lang == Lang::Rust && quote == Some(b'\'') {
                        Tok::Char
                    } else {
                        Tok::Str {
                            fstring: word.contains(['f', 'F']),
                        }
                    };
                    push(&mut out, tok, start..end);
                    i = end;
                } else {
                    push(&mut out, Tok::Name, start..i);
                }
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                push(&mut out, Tok::Op(c), i..i + 1);
                i += 1;
            }
            b')' | b']' | b'}' => {
                depth -= 1;
                push(&mut out, Tok::Op(c), i..i + 1);
                i += 1;
            }
            c if c.is_ascii_whitespace() => i += 1,
            c => {
                push(&mut out, Tok::Op(c), i..i + 1);
                i += 1;
            }
        }
    }
    out
}

fn is_string_prefix(word: &str, lang: Lang) -> bool {
    let w = word.to_ascii_lowercase();
    match lang {
        Lang::Python => matches!(
            w.as_str(),
            "r" | "u" | "b" | "f" | "br" | "rb" | "fr" | "rf"
        ),
        Lang::Rust => matches!(word, "b" | "r" | "br" | "c" | "cr"),
    }
}

/// The end of a string starting with its quote at `at` (Python triple quotes included).
fn string_end(b: &[u8], at: usize, lang: Lang, raw: bool) -> usize {
    let q = b[at];
    let triple = lang == Lang::Python && b.get(at + 1) == Some(&q) && b.get(at + 2) == Some(&q);
    let mut i = at + if triple { 3 } else { 1 };
    while i < b.len() {
        if b[i] == b'\\' && !(raw && lang == Lang::Rust) {
            i += 2;
            continue;
        }
        if b[i] == q {
            if !triple {
                return i + 1;
            }
            if b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q) {
                return i + 3;
            }
        }
        if b[i] == b'\n' && !triple && lang == Lang::Python {
            return i;
        }
        i += 1;
    }
    b.len()
}

/// The end of a Rust raw string whose `#`s or quote start at `at`.
fn rust_raw_end(b: &[u8], at: usize) -> usize {
    let mut i = at;
    let mut hashes = 0;
    while b.get(i) == Some(&b'#') {
        hashes += 1;
        i += 1;
    }
    if b.get(i) != Some(&b'"') {
        return i;
    }
    i += 1;
    while i < b.len() {
        if b[i] == b'"' && (1..=hashes).all(|k| b.get(i + k) == Some(&b'#')) {
            return i + 1 + hashes;
        }
        i += 1;
    }
    b.len()
}

/// The end of a Rust character literal at `at`, or just past the `'` of a lifetime.
fn rust_char_end(b: &[u8], at: usize) -> usize {
    let mut i = at + 1;
    if b.get(i) == Some(&b'\\') {
        i += 2;
        while i < b.len() && b[i] != b'\'' && i < at + 12 {
            i += 1;
        }
        return (i + 1).min(b.len());
    }
    // One character (UTF-8 up to 4 bytes) then a quote; otherwise a lifetime.
    for len in 1..=4 {
        if b.get(i + len) == Some(&b'\'') {
            return i + len + 1;
        }
    }
    i
}

/// How many leading arguments of an assertion hold what it compares.
fn compared_args(name: &str) -> usize {
    match name {
        "assertTrue" | "assertFalse" | "assertIsNone" | "assertIsNotNone" | "assert_"
        | "failUnless" | "failIf" | "assert" | "debug_assert" => 1,
        _ => 2,
    }
}

fn is_assert_name(name: &str) -> bool {
    name.starts_with("assert") || name.starts_with("fail")
}

/// The expected values of the assertions of a test file, in file order.
pub fn sites(src: &str, lang: Lang) -> Vec<Site> {
    let toks = lex(src, lang);
    let text = |t: &Token| &src[t.span.clone()];
    let mut out = Vec::new();
    let mut test = String::new();
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        if t.tok != Tok::Name {
            i += 1;
            continue;
        }
        let name = text(t);
        let def = match lang {
            Lang::Python => "def",
            Lang::Rust => "fn",
        };
        if name == def {
            if let Some(f) = toks.get(i + 1).filter(|f| f.tok == Tok::Name) {
                test = text(f).to_string();
            }
        }
        let next = toks.get(i + 1).map(|t| &t.tok);
        let prev = i.checked_sub(1).map(|p| &toks[p].tok);
        let range = match lang {
            Lang::Python if name == "assert" && !matches!(prev, Some(Tok::Op(b'.'))) => {
                // The statement to the end of its logical line; its expression is what
                // comes before the first comma outside brackets (the rest is the message).
                let mut j = i + 1;
                let mut depth = 0;
                while j < toks.len() && toks[j].tok != Tok::Newline {
                    match toks[j].tok {
                        Tok::Op(b'(' | b'[' | b'{') => depth += 1,
                        Tok::Op(b')' | b']' | b'}') => depth -= 1,
                        Tok::Op(b',' | b';') if depth == 0 => break,
                        _ => {}
                    }
                    j += 1;
                }
                Some((i + 1..j, j))
            }
            Lang::Python if is_assert_name(name) && next == Some(&Tok::Op(b'(')) => {
                args_range(&toks, i + 1, compared_args(name), src)
            }
            Lang::Rust
                if matches!(
                    name,
                    "assert"
                        | "assert_eq"
                        | "assert_ne"
                        | "debug_assert"
                        | "debug_assert_eq"
                        | "debug_assert_ne"
                ) && next == Some(&Tok::Op(b'!'))
                    && matches!(
                        toks.get(i + 2).map(|t| &t.tok),
                        Some(Tok::Op(b'(' | b'[' | b'{'))
                    ) =>
            {
                args_range(&toks, i + 2, compared_args(name), src)
            }
            _ => None,
        };
        let Some((within, resume)) = range else {
            i += 1;
            continue;
        };
        let last = toks[within]
            .iter()
            .rev()
            .find_map(|t| literal_kind(t, src, lang).map(|k| (t.span.clone(), k)));
        if let Some((span, kind)) = last {
            out.push(Site {
                span,
                kind,
                test: test.clone(),
            });
        }
        i = resume.max(i + 1);
    }
    out
}

/// The tokens of the first `n` arguments of the call whose `(` is at `open` (keyword
/// arguments left out), and the index after its `)`.
fn args_range(toks: &[Token], open: usize, n: usize, src: &str) -> Option<(Range<usize>, usize)> {
    let mut depth = 0;
    let mut args = 0;
    let mut end_of_compared = None;
    let mut j = open;
    while j < toks.len() {
        match toks[j].tok {
            Tok::Op(b'(' | b'[' | b'{') => depth += 1,
            Tok::Op(b')' | b']' | b'}') => {
                depth -= 1;
                if depth == 0 {
                    let end = end_of_compared.unwrap_or(j);
                    return Some((open + 1..end, j + 1));
                }
            }
            Tok::Op(b',') if depth == 1 => {
                args += 1;
                if args == n && end_of_compared.is_none() {
                    end_of_compared = Some(j);
                }
            }
            Tok::Name if depth == 1 && end_of_compared.is_none() => {
                // `msg=...`: a keyword argument ends the compared part.
                let kw = matches!(toks.get(j + 1).map(|t| &t.tok), Some(Tok::Op(b'=')))
                    && !matches!(toks.get(j + 2).map(|t| &t.tok), Some(Tok::Op(b'=')))
                    && matches!(toks.get(j - 1).map(|t| &t.tok), Some(Tok::Op(b',' | b'(')));
                if kw && !src[toks[j].span.clone()].is_empty() {
                    end_of_compared = Some(j);
                }
            }
            _ => {}
        }
        j += 1;
    }
    None
}

fn literal_kind(t: &Token, src: &str, lang: Lang) -> Option<Literal> {
    match &t.tok {
        Tok::Str { fstring: false } => Some(Literal::Str),
        Tok::Num => {
            let s = &src[t.span.clone()];
            let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '_');
            let lead_ok = !s.starts_with("0x") && !s.starts_with("0o") && !s.starts_with("0b");
            (lead_ok && !digits.is_empty() && digits.bytes().next()?.is_ascii_digit())
                .then_some(Literal::Number)
        }
        Tok::Name => {
            let s = &src[t.span.clone()];
            let b = match lang {
                Lang::Python => matches!(s, "True" | "False"),
                Lang::Rust => matches!(s, "true" | "false"),
            };
            b.then_some(Literal::Bool)
        }
        _ => None,
    }
}

/// The file with every site's literal changed; `rand(n)` gives a number in `0..n`.
pub fn perturb(src: &str, lang: Lang, rand: &mut dyn FnMut(u32) -> u32) -> Perturbed {
    perturb_where(src, lang, rand, &|_| true)
}

/// The file with the literals of the sites in test function `test` changed, the rest as it
/// is. A twin changes one test, chosen at random per grade: code under test that answers
/// some tests honestly and reads the expectations of the others passes a twin of one of
/// those others (and fails a twin of an honest one), where a twin of every test at once
/// would fail on the honest part and let the reading go unseen.
pub fn perturb_test(
    src: &str,
    lang: Lang,
    test: &str,
    rand: &mut dyn FnMut(u32) -> u32,
) -> Perturbed {
    perturb_where(src, lang, rand, &|s| s.test == test)
}

/// The tests of a file that have at least one site, in file order, each once.
pub fn tests_with_sites(src: &str, lang: Lang) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in sites(src, lang) {
        if !out.contains(&s.test) {
            out.push(s.test);
        }
    }
    out
}

fn perturb_where(
    src: &str,
    lang: Lang,
    rand: &mut dyn FnMut(u32) -> u32,
    keep: &dyn Fn(&Site) -> bool,
) -> Perturbed {
    let sites: Vec<Site> = sites(src, lang).into_iter().filter(|s| keep(s)).collect();
    let mut text = String::with_capacity(src.len() + sites.len());
    let mut at = 0;
    for s in &sites {
        text.push_str(&src[at..s.span.start]);
        text.push_str(&changed(&src[s.span.clone()], s.kind, lang, rand));
        at = s.span.end;
    }
    text.push_str(&src[at..]);
    Perturbed {
        text,
        sites: sites.len(),
    }
}

/// One literal, changed.
fn changed(lit: &str, kind: Literal, lang: Lang, rand: &mut dyn FnMut(u32) -> u32) -> String {
    match kind {
        Literal::Bool => match lit {
            "True" => "False".into(),
            "False" => "True".into(),
            "true" => "false".into(),
            _ => "true".into(),
        },
        Literal::Number => {
            let int_end = lit
                .find(|c: char| !c.is_ascii_digit() && c != '_')
                .unwrap_or(lit.len());
            let digits: String = lit[..int_end].chars().filter(|c| *c != '_').collect();
            let bump = u128::from(rand(9) + 1);
            let n = digits
                .parse::<u128>()
                .map_or(bump, |n| n.saturating_add(bump));
            format!("{n}{}", &lit[int_end..])
        }
        Literal::Str => changed_string(lit, lang, rand),
    }
}

/// A string literal with one letter or digit of its body changed, or a letter inserted
/// at its start when it has none (escapes are left whole).
fn changed_string(lit: &str, lang: Lang, rand: &mut dyn FnMut(u32) -> u32) -> String {
    let b = lit.as_bytes();
    let q = lit.find(['"', '\'']).unwrap_or(0);
    let raw = lit[..q].contains(['r', 'R']);
    let quote = b.get(q).copied().unwrap_or(b'"');
    let body_start = if lang == Lang::Python
        && b.get(q + 1) == Some(&quote)
        && b.get(q + 2) == Some(&quote)
        && lit.len() >= q + 6
    {
        q + 3
    } else {
        q + 1
    };
    let mut candidates = Vec::new();
    let mut i = body_start;
    while i < lit.len() {
        let c = b[i];
        if c == b'\\' && !raw {
            i += 2;
            continue;
        }
        if c == quote {
            break;
        }
        if c.is_ascii_alphanumeric() {
            candidates.push(i);
        }
        i += 1;
    }
    let letter = |r: u32| char::from(b'a' + u8::try_from(r % 26).unwrap_or(0));
    if candidates.is_empty() {
        let mut s = String::with_capacity(lit.len() + 1);
        s.push_str(&lit[..body_start]);
        s.push(letter(rand(26)));
        s.push_str(&lit[body_start..]);
        return s;
    }
    let len = u32::try_from(candidates.len()).unwrap_or(u32::MAX);
    let at = candidates[usize::try_from(rand(len)).unwrap_or(0) % candidates.len()];
    let old = b[at];
    let (base, span) = if old.is_ascii_digit() {
        (b'0', 10u8)
    } else if old.is_ascii_uppercase() {
        (b'A', 26)
    } else {
        (b'a', 26)
    };
    // Another character of the same class: never the one it was.
    let step = u8::try_from(rand(u32::from(span) - 1) + 1).unwrap_or(1);
    let new = base + (old - base + step) % span;
    let mut s = lit.to_string();
    s.replace_range(at..=at, &char::from(new).to_string());
    s
}

#[cfg(test)]
mod tests;

//! Why a test failed, in one line: picked from what a JUnit report says about a failed or
//! errored test case (its `message` attribute and its body, often a whole traceback), so
//! that a report shows the assertion and not the last line of a diff (`? ++    ++`).

/// True for a line of a diff a test framework prints under an assertion (`- a`, `+ b`,
/// `?  ^`, `@@ ... @@`).
fn is_diff(line: &str) -> bool {
    line.starts_with(['?', '+', '-']) || line.starts_with("@@")
}

/// The line without pytest's `E   ` prefix, trimmed.
fn clean(line: &str) -> &str {
    let l = line.trim();
    l.strip_prefix("E ").map_or(l, str::trim_start)
}

/// True for the line that states the assertion (Python's `AssertionError: ...`, pytest's
/// `assert ...`, Rust's ``assertion `left == right` failed``).
fn is_assertion(line: &str) -> bool {
    let l = clean(line);
    l.starts_with("AssertionError") || l.starts_with("assert")
}

/// The message of a failed test: the last assertion line of the body, else of the
/// `message` attribute; else the attribute when it is not a diff line; else the last line of
/// the body that is not blank and not a diff line; else the attribute as given.
pub fn failure_message(attribute: Option<&str>, body: Option<&str>) -> Option<String> {
    let assertion = |text: Option<&str>| {
        text.and_then(|t| t.lines().rev().find(|l| is_assertion(l)))
            .map(|l| clean(l).to_string())
    };
    if let Some(a) = assertion(body).or_else(|| assertion(attribute)) {
        return Some(a);
    }
    let attr = attribute.map(str::trim).filter(|a| !a.is_empty());
    if let Some(a) = attr.filter(|a| !a.lines().all(is_diff)) {
        return Some(a.to_string());
    }
    body.and_then(|b| {
        b.lines()
            .rev()
            .find(|l| !l.trim().is_empty() && !is_diff(l))
            .map(|l| l.trim().to_string())
    })
    .or_else(|| attr.map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNITTEST: &str = "Traceback (most recent call last):
  File \"/w/tests/test_hidden.py\", line 9, in test_spaces
    self.assertEqual(slugify(\"a  b\"), \"a-b\")
AssertionError: 'a--b' != 'a-b'
- a--b
?  -
+ a-b
";

    const CARGO: &str = "thread 'tests::counts' panicked at src/lib.rs:30:9:
assertion `left == right` failed
  left: 3
 right: 2
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace";

    const PYTEST: &str = "    def test_x():
>       assert slugify('a b') == 'a-b'
E       AssertionError: assert 'a_b' == 'a-b'
E         - a-b
E         + a_b

tests/test_x.py:3: AssertionError";

    #[test]
    fn the_assertion_not_the_last_line_of_a_diff() {
        let cases: &[(Option<&str>, Option<&str>, Option<&str>)] = &[
            // unittest, as the example tasks' runner reports it (message = last line).
            (
                Some("?  -"),
                Some(UNITTEST),
                Some("AssertionError: 'a--b' != 'a-b'"),
            ),
            (
                Some("test failed"),
                Some(CARGO),
                Some("assertion `left == right` failed"),
            ),
            (
                Some("AssertionError: assert 'a_b' == 'a-b'"),
                Some(PYTEST),
                Some("AssertionError: assert 'a_b' == 'a-b'"),
            ),
            // No assertion anywhere: the attribute, else the body's last plain line.
            (Some("boom"), Some("trace"), Some("boom")),
            (None, Some("kaput"), Some("kaput")),
            (
                Some("? ++    ++"),
                Some("Traceback (most recent call last):\nValueError: bad\n? ++    ++\n"),
                Some("ValueError: bad"),
            ),
            (Some("? ++    ++"), None, Some("? ++    ++")),
            (Some("  "), None, None),
            (None, None, None),
            (None, Some("\n\n"), None),
            // An assertion in a one-line attribute with no body.
            (Some("assert 1 == 2"), None, Some("assert 1 == 2")),
        ];
        for (attr, body, want) in cases {
            assert_eq!(
                failure_message(*attr, *body).as_deref(),
                *want,
                "{attr:?} / {body:?}"
            );
        }
    }
}

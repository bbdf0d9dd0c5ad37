//! Table tests of the compose value syntaxes: every duration form, string commands split
//! as compose splits them, and the quoting of a healthcheck's argv.

use super::*;

#[test]
fn durations_are_read_as_compose_reads_them() {
    for (text, want) in [
        ("10s", 10.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1.5s", 1.5),
        ("2h", 7200.0),
        ("1h2m3s", 3723.0),
        ("250us", 0.000_25),
        ("250µs", 0.000_25),
        ("1000000ns", 0.001),
        ("0s", 0.0),
    ] {
        let got = duration_sec(text).unwrap();
        assert!((got - want).abs() < 1e-9, "{text}: {got}");
    }
    for (bad, needle) in [
        ("", "empty"),
        ("10", "without a unit"),
        ("10x", "unknown unit `x`"),
        ("s", "not a duration"),
        ("1..5s", "not a duration"),
        ("-1s", "not a duration"),
    ] {
        let e = duration_sec(bad).unwrap_err();
        assert!(e.contains(needle), "{bad}: {e}");
    }
}

#[test]
fn a_string_command_is_split_into_words_without_a_shell() {
    let words = |s: &str| split_words(s).unwrap();
    assert_eq!(
        words("redis-server --port 6379"),
        ["redis-server", "--port", "6379"]
    );
    assert_eq!(words("  a   b  "), ["a", "b"]);
    assert_eq!(
        words("sh -c 'echo a && echo b'"),
        ["sh", "-c", "echo a && echo b"]
    );
    assert_eq!(words(r#"echo "a \"b\" \n""#), ["echo", r#"a "b" \n"#]);
    assert_eq!(words(r"a\ b c"), ["a b", "c"]);
    assert_eq!(words("''"), [""]);
    assert_eq!(words(""), Vec::<String>::new());
    for (bad, needle) in [
        ("echo 'a", "unclosed `'`"),
        ("echo \"a", "unclosed `\"`"),
        ("echo a\\", "lone `\\`"),
        ("a && b", "operator `&`"),
        ("a; b", "operator `;`"),
        ("a | b", "operator `|`"),
        ("a > f", "operator `>`"),
        ("echo `id`", "operator ```"),
    ] {
        let e = split_words(bad).unwrap_err();
        assert!(e.contains(needle), "{bad}: {e}");
    }
}

#[test]
fn an_argv_is_quoted_into_one_shell_command_that_runs_exactly_it() {
    let argv: Vec<String> = [
        "curl",
        "-f",
        "http://localhost:80/",
        "it's",
        "",
        "a b",
        "$HOME",
    ]
    .map(String::from)
    .to_vec();
    let cmd = shell_join(&argv);
    assert_eq!(
        cmd,
        r#"curl -f http://localhost:80/ 'it'\''s' '' 'a b' '$HOME'"#
    );
    // sh gives the words back exactly.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("for a in {cmd}; do printf '[%s]' \"$a\"; done"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "[curl][-f][http://localhost:80/][it's][][a b][$HOME]"
    );
}

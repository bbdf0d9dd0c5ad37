use super::*;

/// A fixed sequence of "random" numbers: always the lowest choice.
fn zero(_: u32) -> u32 {
    0
}

fn literals(src: &str, lang: Lang) -> Vec<&str> {
    sites(src, lang).into_iter().map(|s| &src[s.span]).collect()
}

#[test]
fn which_files_are_test_files() {
    let table: &[(&str, &str, Option<Lang>)] = &[
        ("test_outputs.py", "", Some(Lang::Python)),
        ("test_hidden.py", "import unittest", Some(Lang::Python)),
        ("slug_test.py", "", Some(Lang::Python)),
        ("run_tests.py", "import unittest", None),
        ("conftest.py", "def test_x(): pass", None),
        ("hidden.rs", "#[test]\nfn t() {}", Some(Lang::Rust)),
        ("helpers.rs", "fn x() {}", None),
        ("test.sh", "#[test]", None),
        ("cargo_junit.py", "", None),
    ];
    for (name, content, want) in table {
        assert_eq!(test_lang(name, content), *want, "{name}");
    }
}

#[test]
fn the_expected_value_of_each_python_assertion() {
    let src = r#"
import unittest
from pyslug import slugify

class T(unittest.TestCase):
    def test_a(self):
        self.assertEqual(slugify("The quick", max_length=9), "the-quick")
        self.assertEqual(
            slugify("one two three", separator="--", max_length=8), "one--two"
        )
        self.assertLessEqual(len(slug), n)
        self.assertFalse(slug.endswith("-"), slug)
        self.assertTrue(ok, "a message")
        self.assertEqual(count, 3, msg="not this")
        self.assertIn("b", s)
        self.assertAlmostEqual(x, 1.5, places=2)
        self.assertIs(flag, True)

def test_b(tmp_path):
    assert run(tmp_path, "The cat", "1") == ["the 3"]
    assert len(run(tmp_path, text)) == 10, "ten words"
    assert f"{x}" == f"{y}"
    assert out == 'it\'s'  # a comment "not this"
    assert value == 2 and \
        other == "tail"
    x.assert_called_with("not an assert statement")
    assert s == """many
lines"""
"#;
    assert_eq!(
        literals(src, Lang::Python),
        vec![
            "\"the-quick\"",
            "\"one--two\"",
            "\"-\"",
            "3",
            "\"b\"",
            "1.5",
            "True",
            "\"the 3\"",
            "10",
            "'it\\'s'",
            "\"tail\"",
            "\"not an assert statement\"",
            "\"\"\"many\nlines\"\"\"",
        ]
    );
}

#[test]
fn the_expected_value_of_each_rust_assertion() {
    let src = r##"
use wordcount::{count_lines, Stats};

#[test]
fn a() {
    assert_eq!(count_lines("a\nb"), 2);
    assert_eq!((s.lines, s.words, s.chars), (2, 3, 13));
    assert!(s.is_empty(), "message {}", 5);
    assert!(x == 'c');
    assert_ne!(f(1..3), r#"raw "str""#, "msg");
    // assert_eq!(commented, 9);
    /* assert_eq!(block, /* nested */ 9); */
    assert_eq!(v.0, 7u64);
    assert!(flag == true);
    let s: &'static str = "x";
    debug_assert_eq!(y, 2.5);
}
"##;
    assert_eq!(
        literals(src, Lang::Rust),
        vec!["2", "13", "r#\"raw \"str\"\"#", "7u64", "true", "2.5"]
    );
}

#[test]
fn each_literal_is_changed_and_nothing_else() {
    let table: &[(&str, Lang, &str, &str)] = &[
        (
            "assert x == \"the-quick\"\n",
            Lang::Python,
            "zero",
            "assert x == \"uhe-quick\"\n",
        ),
        (
            "assert x == 'A9'\n",
            Lang::Python,
            "zero",
            "assert x == 'B9'\n",
        ),
        (
            "assert x == \"\"\n",
            Lang::Python,
            "zero",
            "assert x == \"a\"\n",
        ),
        (
            "assert x == \"-\\n\"\n",
            Lang::Python,
            "zero",
            "assert x == \"a-\\n\"\n",
        ),
        ("assert x == 10\n", Lang::Python, "zero", "assert x == 11\n"),
        (
            "assert x == 1_000\n",
            Lang::Python,
            "zero",
            "assert x == 1001\n",
        ),
        (
            "assert x == 0.25\n",
            Lang::Python,
            "zero",
            "assert x == 1.25\n",
        ),
        (
            "assert x is False\n",
            Lang::Python,
            "zero",
            "assert x is True\n",
        ),
        (
            "assert x == b'ok'\n",
            Lang::Python,
            "zero",
            "assert x == b'pk'\n",
        ),
        (
            "#[test]\nfn t() { assert_eq!(x, 2u64); }",
            Lang::Rust,
            "zero",
            "#[test]\nfn t() { assert_eq!(x, 3u64); }",
        ),
        (
            "#[test]\nfn t() { assert!(!f(false)); }",
            Lang::Rust,
            "zero",
            "#[test]\nfn t() { assert!(!f(true)); }",
        ),
    ];
    for (src, lang, _, want) in table {
        let p = perturb(src, *lang, &mut zero);
        assert_eq!(p.text, *want, "{src}");
        assert_eq!(p.sites, 1, "{src}");
    }
}

#[test]
fn a_changed_character_is_never_the_one_it_was() {
    // Every random choice the perturbation can make, on letters, capitals and digits.
    for lit in ["\"a\"", "\"Z\"", "\"0\"", "\"9\"", "\"z\""] {
        let src = format!("assert x == {lit}\n");
        for r in 0..40 {
            let p = perturb(&src, Lang::Python, &mut |n| r % n);
            assert_ne!(p.text, src, "{lit} with {r}");
            assert_eq!(p.text.len(), src.len());
        }
    }
    for r in 0..9 {
        let p = perturb("assert x == 7\n", Lang::Python, &mut |n| r % n);
        assert_ne!(p.text, "assert x == 7\n");
    }
}

#[test]
fn a_file_without_assertions_has_no_sites_and_is_unchanged() {
    for (src, lang) in [
        ("def helper():\n    return \"x\"\n", Lang::Python),
        ("import os\nprint('assert x == 1')\n", Lang::Python),
        (
            "fn helper() -> u8 { 3 }\n// assert_eq!(a, 1);\n",
            Lang::Rust,
        ),
        ("", Lang::Rust),
        ("assert", Lang::Python),
        ("assert_eq!(", Lang::Rust),
        ("self.assertEqual(\"unterminated", Lang::Python),
    ] {
        let p = perturb(src, lang, &mut zero);
        assert_eq!(p.text, src);
        let expect_sites = usize::from(src.starts_with("self.assertEqual"));
        assert!(p.sites <= expect_sites, "{src:?}: {}", p.sites);
    }
}

#[test]
fn the_example_tasks_hidden_tests_are_perturbed_at_every_assertion() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tasks");
    let mut seen = 0;
    for (task, file, at_least) in [
        ("pyslug-001", "test_hidden.py", 6),
        ("wordcount-001", "hidden.rs", 5),
        ("tb-wordfreq-001", "test_outputs.py", 4),
    ] {
        let path = root.join(task).join("tests").join(file);
        let src = std::fs::read_to_string(&path).unwrap();
        let lang = test_lang(file, &src).unwrap();
        let p = perturb(&src, lang, &mut |n| 7 % n);
        assert!(p.sites >= at_least, "{task}: {} sites", p.sites);
        assert_ne!(p.text, src);
        // Only literals change: the same lines, the same number of them.
        assert_eq!(p.text.lines().count(), src.lines().count(), "{task}");
        seen += 1;
    }
    assert_eq!(seen, 3);
}

proptest::proptest! {
    #[test]
    fn perturbing_never_panics_and_keeps_the_text_outside_the_sites(src in "[ -~\n]{0,200}", py in proptest::bool::ANY, seed in 0u32..1000) {
        let lang = if py { Lang::Python } else { Lang::Rust };
        let s = sites(&src, lang);
        let p = perturb(&src, lang, &mut |n| seed % n.max(1));
        proptest::prop_assert_eq!(p.sites, s.len());
        if s.is_empty() {
            proptest::prop_assert_eq!(&p.text, &src);
        } else {
            proptest::prop_assert!(p.text.starts_with(&src[..s[0].span.start]));
            proptest::prop_assert!(p.text.ends_with(&src[s[s.len() - 1].span.end..]));
        }
    }
}

#[test]
fn sites_know_their_test_and_one_test_is_changed_alone() {
    let py = "import unittest\n\ndef value():\n    return 1\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(value(), 42)\n        self.assertEqual(value(), 43)\n\n    def test_b(self):\n        self.assertIn(\"x\", s)\n\n    def test_c(self):\n        self.assertLessEqual(len(s), n)\n\ndef test_d():\n    assert value() == True\n";
    assert_eq!(
        tests_with_sites(py, Lang::Python),
        vec!["test_a", "test_b", "test_d"]
    );
    let p = perturb_test(py, Lang::Python, "test_b", &mut zero);
    assert_eq!(p.sites, 1);
    assert!(p.text.contains("self.assertIn(\"y\", s)"), "{}", p.text);
    assert!(
        p.text.contains("self.assertEqual(value(), 42)"),
        "{}",
        p.text
    );
    let p = perturb_test(py, Lang::Python, "test_a", &mut zero);
    assert_eq!(p.sites, 2);
    assert!(
        p.text
            .contains("43)\n        self.assertEqual(value(), 44)"),
        "{}",
        p.text
    );
    assert_eq!(perturb_test(py, Lang::Python, "test_c", &mut zero).text, py);
    assert_eq!(perturb_test(py, Lang::Python, "nope", &mut zero).sites, 0);
    let rs = "#[test]\nfn one() {\n    assert_eq!(f(), 1);\n}\n\n#[test]\nfn two() {\n    assert_eq!(g(), \"b\");\n    assert!(h());\n}\n";
    assert_eq!(tests_with_sites(rs, Lang::Rust), vec!["one", "two"]);
    let p = perturb_test(rs, Lang::Rust, "two", &mut zero);
    assert_eq!(p.text, rs.replace("\"b\"", "\"c\""));
}

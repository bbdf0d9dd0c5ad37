use super::*;
use std::io::BufReader;

/// The texts `for_each_text` gives for `doc`, read through a buffer of `capacity` bytes (so
/// that a trial spans reads), and whether the document ended.
fn texts(doc: &str, capacity: usize) -> Result<(Vec<String>, bool), String> {
    let mut input = BufReader::with_capacity(capacity, doc.as_bytes());
    let mut seen = Vec::new();
    let done = for_each_text(&mut input, &mut |t| {
        seen.push(String::from_utf8(t.to_vec()).unwrap());
        true
    })
    .map_err(|e| match e {
        ScanError::Shape(p) => p,
        ScanError::Io(e) => panic!("no read fails here: {e}"),
    })?;
    Ok((seen, done))
}

/// Every buffer size from one byte to the whole document gives the same texts.
fn texts_every_way(doc: &str) -> Result<Vec<String>, String> {
    let whole = texts(doc, doc.len().max(1))?;
    for capacity in [1, 2, 3, 5, 8, 13, 64] {
        assert_eq!(texts(doc, capacity)?, whole, "capacity {capacity}: {doc}");
    }
    assert!(whole.1);
    Ok(whole.0)
}

#[test]
fn each_trial_is_given_as_written() {
    let tricky = r#"{"a":"x\",]}[,\\","b":[1,{"c":"\\"}],"d":"\u0022"}"#;
    let cases: &[(&str, &[&str])] = &[
        (r#"{"digest":"d","trials":[]}"#, &[]),
        (r#"{"trials":[{"k":1}]}"#, &[r#"{"k":1}"#]),
        (
            r#"{"a":1,"trials":[{"k":1},{"k":[2,3]},{"k":{"j":"]"}}]}"#,
            &[r#"{"k":1}"#, r#"{"k":[2,3]}"#, r#"{"k":{"j":"]"}}"#],
        ),
        // A key `trials` below the top level, and `trials` as a top-level value, are not it.
        (
            r#"{"run_key":"trials","summary":{"trials":[9],"x":{"trials":[8]}},"trials":[{"k":1}]}"#,
            &[r#"{"k":1}"#],
        ),
        // Strings holding quotes, brackets, commas and backslashes.
        (
            &format!(r#"{{"note":"\"trials\":[","trials":[{tricky},{tricky}]}}"#),
            &[tricky, tricky],
        ),
        // Whitespace in the head and after the array (a trial's own is its text).
        (
            "{ \"a\" : [ 1 ] ,\n \"trials\" : [{\"k\":1}] }\n",
            &[r#"{"k":1}"#],
        ),
    ];
    for (doc, want) in cases {
        assert_eq!(texts_every_way(doc).unwrap(), *want, "{doc}");
    }
}

#[test]
fn a_document_of_another_shape_is_refused_naming_what_is_wrong() {
    let big = format!(
        r#"{{"trials":[{{"k":"{}"}}]}}"#,
        "x".repeat(MAX_TRIAL_BYTES)
    );
    let cases: &[(&str, &str)] = &[
        (r#"{"digest":"d"}"#, "it has no trials"),
        (r#"{"summary":{"trials":[1]}}"#, "it has no trials"),
        ("", "it has no trials"),
        (r#"{"trials":{"k":1}}"#, "its trials are not an array"),
        (r#"{"trials":[{"k":1},{"k":2}"#, "its trials end after 1"),
        (r#"{"trials":[{"k":1},]}"#, "trial 1 is empty"),
        (r#"{"trials":[,{"k":1}]}"#, "trial 0 is empty"),
        (r#"{"trials":[{"k":1}}]}"#, "trial 0 is not JSON"),
        (
            r#"{"trials":[{"k":1}],"z":1}"#,
            "something follows its trials",
        ),
        (r#"{"trials":[{"k":1}]"#, "its document is not closed"),
        (r#"{"trials":[{"k":1}]}}"#, "something follows its trials"),
        (&big, "trial 0 is over"),
    ];
    for (doc, want) in cases {
        for capacity in [1, 7, 1 << 16] {
            let got = texts(doc, capacity).unwrap_err();
            assert!(
                got.starts_with(want),
                "{doc:.80}: got {got:?}, want {want:?}"
            );
        }
    }
}

#[test]
fn the_consumer_stops_the_read() {
    let doc = r#"{"trials":[{"k":1},{"k":2},{"k":3}]}"#;
    for capacity in [1, 4, 64] {
        let mut input = BufReader::with_capacity(capacity, doc.as_bytes());
        let mut n = 0;
        let done = for_each_text(&mut input, &mut |_| {
            n += 1;
            n < 2
        })
        .unwrap();
        assert_eq!((done, n), (false, 2), "capacity {capacity}");
    }
}

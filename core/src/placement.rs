//! Which workers may run a plan's trials: `execution.worker_labels` lists labels a worker must
//! advertise (`akbench-worker --label key=value`). A required `key` matches a worker that has
//! that label with any value; `key=value` matches only that value. No requirement: any worker.
//! The coordinator's claim (`claim_candidates.sql`) mirrors [`eligible`] in SQL, and its tests
//! run [`TABLE`] against that SQL.

use std::collections::BTreeMap;

/// Whether a worker advertising `labels` may run work that requires `required`.
pub fn eligible(required: &[String], labels: &BTreeMap<String, String>) -> bool {
    required.iter().all(|r| match r.split_once('=') {
        Some((k, v)) => labels.get(k).is_some_and(|have| have == v),
        None => labels.contains_key(r.as_str()),
    })
}

/// Checks one required label as written in a manifest; the error says what is wrong.
pub fn check(required: &str) -> Result<(), String> {
    let key = required.split_once('=').map_or(required, |(k, _)| k);
    if key.is_empty() {
        return Err(format!("`{required}` has no label name before `=`"));
    }
    if required
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!("`{required}` contains white space"));
    }
    Ok(())
}

/// The labels of `required` that no worker in `workers` satisfies on its own, or all of
/// `required` when no worker satisfies the whole set; empty when one worker is eligible.
pub fn unmet<'a>(required: &'a [String], workers: &[BTreeMap<String, String>]) -> Vec<&'a str> {
    if workers.iter().any(|w| eligible(required, w)) {
        return Vec::new();
    }
    required.iter().map(String::as_str).collect()
}

/// One row of [`TABLE`]: the labels required, the worker's labels, whether it is eligible.
pub type Row = (
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
    bool,
);

/// The eligibility table. Run against [`eligible`] here and against the claim SQL in the
/// coordinator's tests.
pub const TABLE: &[Row] = &[
    (&[], &[], true),
    (&[], &[("gpu", "a100")], true),
    (&["gpu"], &[], false),
    (&["gpu"], &[("gpu", "")], true),
    (&["gpu"], &[("gpu", "a100")], true),
    (&["gpu=a100"], &[("gpu", "a100")], true),
    (&["gpu=a100"], &[("gpu", "h100")], false),
    (&["gpu=a100"], &[("gpu", "")], false),
    (
        &["gpu", "arch=arm64"],
        &[("gpu", "x"), ("arch", "arm64")],
        true,
    ),
    (
        &["gpu", "arch=arm64"],
        &[("gpu", "x"), ("arch", "x86_64")],
        false,
    ),
    (&["gpu", "arch=arm64"], &[("arch", "arm64")], false),
    (&["arch"], &[("arch64", "y")], false),
];

/// A [`TABLE`] row as typed values.
pub fn row(required: &[&str], labels: &[(&str, &str)]) -> (Vec<String>, BTreeMap<String, String>) {
    (
        required.iter().map(|s| (*s).to_string()).collect(),
        labels
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds() {
        for (required, labels, want) in TABLE {
            let (r, l) = row(required, labels);
            assert_eq!(eligible(&r, &l), *want, "{required:?} on {labels:?}");
        }
    }

    #[test]
    fn bad_labels_are_named() {
        assert!(check("gpu").is_ok());
        assert!(check("gpu=a100").is_ok());
        assert!(check("gpu=").is_ok());
        assert!(check("=a100").unwrap_err().contains("no label name"));
        assert!(check("").unwrap_err().contains("no label name"));
        assert!(check("g pu").unwrap_err().contains("white space"));
    }

    #[test]
    fn unmet_names_the_labels_when_no_worker_has_them_all() {
        let req = vec!["gpu".to_string(), "arch=arm64".to_string()];
        let (_, a) = row(&[], &[("gpu", "")]);
        let (_, b) = row(&[], &[("arch", "arm64")]);
        assert_eq!(
            unmet(&req, &[a.clone(), b.clone()]),
            vec!["gpu", "arch=arm64"]
        );
        let (_, both) = row(&[], &[("gpu", ""), ("arch", "arm64")]);
        assert!(unmet(&req, &[a, both]).is_empty());
        assert!(unmet(&[], &[]).is_empty());
    }
}

//! Identities: UUIDv7s and readable keys for runs, trials and attempts.
//!
//! Run key: `<experiment>-<yyyymmdd>-<4 hex>`; trial key: `<run key>/<task>/<agent>/r<rep>`;
//! attempt key: `<trial key>/a<n>`; with best-of-N candidates a candidate is `<trial key>/c<i>`
//! and its attempts `<trial key>/c<i>/a<n>`. Commands accept either the UUID or the key.

use chrono::{DateTime, Utc};
use uuid::{timestamp::context::NoContext, Timestamp, Uuid};

/// A new UUIDv7 whose timestamp is `at`.
pub fn uuid_v7_at(at: DateTime<Utc>) -> Uuid {
    let secs = u64::try_from(at.timestamp()).unwrap_or(0);
    Uuid::new_v7(Timestamp::from_unix(
        NoContext,
        secs,
        at.timestamp_subsec_nanos(),
    ))
}

/// A draw in `[0, 1)` from the 53 low random bits of a fresh UUIDv7 (its low 62 bits are
/// random): the source of retry jitter for the coordinator and `sweep --local` alike.
pub fn random_unit() -> f64 {
    let bits = (Uuid::now_v7().as_u128() as u64) & ((1u64 << 53) - 1);
    bits as f64 / (1u64 << 53) as f64
}

/// True when `id` is a version-7 UUID.
pub fn is_uuid_v7(id: &Uuid) -> bool {
    id.get_version_num() == 7
}

/// A run key: `<experiment>-<yyyymmdd>-<4 hex>`, the hex taken from the run's UUID random bits.
pub fn run_key(experiment: &str, at: DateTime<Utc>, run_id: &Uuid) -> String {
    let bytes = run_id.as_bytes();
    format!(
        "{}-{}-{:02x}{:02x}",
        slug(experiment),
        at.format("%Y%m%d"),
        bytes[14],
        bytes[15]
    )
}

/// A trial key: `<run key>/<task>/<agent>/r<rep>`. The task id and the agent label appear
/// as written (`partA` stays `partA`: one spelling in the manifest, keys, records, status and
/// on the command line); only a character outside `[A-Za-z0-9._-]` becomes `-` (see
/// [`key_part`]). Keys of plans made before this rule (lowercased) are stored in their plans
/// and stay valid.
pub fn trial_key(run_key: &str, task: &str, agent: &str, repetition: u32) -> String {
    format!(
        "{run_key}/{}/{}/r{repetition}",
        key_part(task),
        key_part(agent)
    )
}

/// A candidate's key: `<trial key>/c<i>` (candidates count from 1); its attempts are
/// `<trial key>/c<i>/a<n>`.
pub fn candidate_key(trial_key: &str, candidate: u32) -> String {
    format!("{trial_key}/c{candidate}")
}

/// An attempt key: `<trial key>/a<n>` (attempts count from 1).
pub fn attempt_key(trial_key: &str, attempt: u32) -> String {
    format!("{trial_key}/a{attempt}")
}

/// Lowercases and replaces every character outside `[a-z0-9._-]` with `-`, so a name is safe
/// inside a key and as a path component (the experiment's part of a run key).
pub fn slug(name: &str) -> String {
    key_part(&name.to_ascii_lowercase())
}

/// Replaces every character outside `[A-Za-z0-9._-]` with `-`, keeping the case, so a name is
/// safe inside a key and as a path component; a valid name ([`is_valid_name`]) is unchanged.
pub fn key_part(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if s.is_empty() || s.chars().all(|c| c == '.') {
        "-".to_string()
    } else {
        s
    }
}

/// True when `s` is a safe identifier for a task or agent name: `[A-Za-z0-9._-]+`, not
/// starting with `.` or `-`.
pub fn is_valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && !s.starts_with('.')
        && !s.starts_with('-')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-')
}

/// The longest identifier a client may send (a run key or UUID, a worker id, a trial key), in
/// bytes; far above any akbench makes (run keys are at most a few dozen characters).
pub const MAX_ID_BYTES: usize = 256;

/// Checks an identifier that came from a client before it reaches a database or a message:
/// 1 to [`MAX_ID_BYTES`] bytes of printable ASCII without spaces (`[!-~]`), which every
/// run key, UUID, worker id and trial key is. The problem names the length or the first bad
/// byte, never repeats a long value.
pub fn check_client_id(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("is empty".into());
    }
    if s.len() > MAX_ID_BYTES {
        return Err(format!(
            "is {} bytes, more than the maximum {MAX_ID_BYTES}",
            s.len()
        ));
    }
    match s.bytes().position(|b| !b.is_ascii_graphic()) {
        None => Ok(()),
        Some(i) => Err(format!(
            "holds byte 0x{:02x} at offset {i}; only printable ASCII without spaces is an identifier",
            s.as_bytes()[i]
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_units_are_in_zero_one() {
        for _ in 0..1000 {
            let x = random_unit();
            assert!((0.0..1.0).contains(&x), "{x}");
        }
    }

    #[test]
    fn client_identifiers_are_short_printable_ascii() {
        for ok in [
            "demo-20260304-ab12",
            "0194d6a2-7c1e-7c3e-9a55-0123456789ab",
            "demo-20260304-ab12/wordcount-001/oracle/r1/c2",
            &"a".repeat(MAX_ID_BYTES),
        ] {
            assert_eq!(check_client_id(ok), Ok(()), "{ok}");
        }
        for (bad, words) in [
            ("", "empty"),
            ("run\0x", "0x00 at offset 3"),
            ("run x", "0x20"),
            ("caf\u{e9}", "0xc3"),
            ("a\nb", "0x0a"),
        ] {
            let e = check_client_id(bad).unwrap_err();
            assert!(e.contains(words), "{bad:?}: {e}");
        }
        let huge = "r".repeat(300_000);
        let e = check_client_id(&huge).unwrap_err();
        assert!(e.contains("300000 bytes") && e.len() < 100, "{e}");
    }
    use chrono::TimeZone;

    #[test]
    fn keys_have_the_documented_shape() {
        let at = Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap();
        let id = uuid_v7_at(at);
        assert!(is_uuid_v7(&id));
        let rk = run_key("My Exp", at, &id);
        assert!(rk.starts_with("my-exp-20261129-"), "{rk}");
        assert_eq!(rk.len(), "my-exp-20261129-".len() + 4);
        let tk = trial_key(&rk, "wordcount-001", "oracle", 2);
        assert_eq!(tk, format!("{rk}/wordcount-001/oracle/r2"));
        assert_eq!(
            trial_key(&rk, "Task-1", "partA", 1),
            format!("{rk}/Task-1/partA/r1"),
            "task ids and agent labels as written"
        );
        assert_eq!(attempt_key(&tk, 1), format!("{tk}/a1"));
        let ck = candidate_key(&tk, 3);
        assert_eq!(attempt_key(&ck, 2), format!("{tk}/c3/a2"));
    }

    #[test]
    fn uuid_v7_carries_the_timestamp() {
        let at = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        let id = uuid_v7_at(at);
        let (secs, _) = id.get_timestamp().unwrap().to_unix();
        assert_eq!(secs, at.timestamp() as u64);
    }

    #[test]
    fn names_and_slugs() {
        assert!(is_valid_name("wordcount-001"));
        assert!(!is_valid_name("../etc"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("a/b"));
        assert_eq!(slug("A/b c"), "a-b-c");
        assert_eq!(slug(".."), "-");
        assert_eq!(key_part("partA b/c"), "partA-b-c");
        assert_eq!(key_part(".."), "-");
        assert_eq!(key_part(""), "-");
    }
}

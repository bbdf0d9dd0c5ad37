//! Canonical JSON and content digests.
//!
//! A digest is `sha256:<hex>` of the canonical JSON encoding of a value: object keys sorted,
//! no insignificant whitespace. Two documents with the same content always share a digest.

mod canon;

use serde::Serialize;
use sha2::{Digest as _, Sha256};

/// Prefix of every digest string.
pub const DIGEST_PREFIX: &str = "sha256:";

/// Encodes `value` as canonical JSON (sorted keys, compact).
///
/// Byte-identical to a round trip through `serde_json::Value` (whose objects are `BTreeMap`s;
/// `preserve_order` is never enabled in this workspace), without building the tree.
pub fn canonical_json<T: Serialize + ?Sized>(value: &T) -> String {
    String::from_utf8(canon::to_canonical(value, false)).expect("JSON is UTF-8")
}

/// The reference encoding: a round trip through `serde_json::Value`. Slower; kept to check
/// [`canonical_json`] against.
pub fn canonical_json_via_value<T: Serialize + ?Sized>(value: &T) -> String {
    let value = serde_json::to_value(value).expect("domain values always serialize to JSON");
    serde_json::to_string(&value).expect("a JSON value always serializes")
}

/// The digest of `value`'s canonical JSON.
pub fn digest_of<T: Serialize + ?Sized>(value: &T) -> String {
    digest_bytes(canonical_json(value).as_bytes())
}

/// The digest of a sealed document: the canonical JSON of `value` with its own top-level
/// `digest` field left out, so a document can carry the digest of its content.
pub fn sealed_digest<T: Serialize + ?Sized>(value: &T) -> String {
    let mut v = serde_json::to_value(value).expect("domain values always serialize to JSON");
    if let Some(o) = v.as_object_mut() {
        o.remove("digest");
    }
    digest_bytes(
        serde_json::to_string(&v)
            .expect("a JSON value always serializes")
            .as_bytes(),
    )
}

/// The digest of raw bytes.
pub fn digest_bytes(bytes: &[u8]) -> String {
    format!("{DIGEST_PREFIX}{}", hex::encode(Sha256::digest(bytes)))
}

/// An incremental sha256 for content that arrives in pieces (directory trees).
#[derive(Debug, Default, Clone)]
pub struct Hasher(Sha256);

impl Hasher {
    /// Adds bytes to the digest.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// Finishes and renders as `sha256:<hex>`.
    pub fn finish(self) -> String {
        format!("{DIGEST_PREFIX}{}", hex::encode(self.0.finalize()))
    }
}

#[cfg(test)]
mod canon_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_and_is_compact() {
        let v = json!({"b": 1, "a": {"d": [1, 2], "c": null}});
        assert_eq!(canonical_json(&v), r#"{"a":{"c":null,"d":[1,2]},"b":1}"#);
    }

    #[test]
    fn equal_content_equal_digest_different_content_different_digest() {
        let a = json!({"x": 1, "y": 2});
        let b = json!({"y": 2, "x": 1});
        let c = json!({"y": 2, "x": 3});
        assert_eq!(digest_of(&a), digest_of(&b));
        assert_ne!(digest_of(&a), digest_of(&c));
        assert!(digest_of(&a).starts_with("sha256:"));
        assert_eq!(digest_of(&a).len(), 7 + 64);
    }
}

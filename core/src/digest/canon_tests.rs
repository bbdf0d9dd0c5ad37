use super::*;
use crate::clock::SystemClock;
use proptest::prelude::*;
use serde_json::{json, Value};

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<u64>().prop_map(|u| json!(u)),
        (-1e12f64..1e12).prop_map(|f| json!(f)),
        "[ -~\\n\\t\"\\\\é]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::btree_map("[ -~\\n\"\\\\é]{0,4}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn fast_writer_matches_the_value_round_trip(v in arb_json()) {
        prop_assert_eq!(canonical_json(&v), canonical_json_via_value(&v));
    }
}

#[test]
fn matches_on_domain_documents_and_drops_only_the_top_digest() {
    let spec = crate::testkit::synthetic_spec(3, 2, 2, &SystemClock);
    let plan = crate::plan::plan(&spec, &SystemClock);
    assert_eq!(canonical_json(&spec), canonical_json_via_value(&spec));
    assert_eq!(canonical_json(&plan), canonical_json_via_value(&plan));
    let mut v = serde_json::to_value(&plan).unwrap();
    v.as_object_mut().unwrap().remove("digest");
    assert_eq!(sealed_digest(&plan), digest_of(&v));
    // Nested `digest` fields (task releases, agents) stay.
    assert!(String::from_utf8(canon::to_canonical(&plan, true))
        .unwrap()
        .contains("\"digest\":\"sha256:"));
}

/// A map written in the order given, keys repeated as given (as a struct's fields or a
/// `flatten` can come): the writer must sort it and keep the last of equal keys.
struct Pairs(Vec<(String, Value)>);

impl Serialize for Pairs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

proptest! {
    #[test]
    fn members_in_any_order_are_sorted_and_the_last_of_a_key_kept(
        pairs in proptest::collection::vec(("[ab!\"\\\\é]{0,3}", arb_json()), 0..8),
        nested in any::<bool>(),
    ) {
        let doc = Pairs(pairs);
        // Nested: an object inside an array inside another member's neighbour.
        let (got, want) = if nested {
            let outer = (json!({"z": 1}), &doc);
            (canonical_json(&outer), canonical_json_via_value(&outer))
        } else {
            (canonical_json(&doc), canonical_json_via_value(&doc))
        };
        prop_assert_eq!(got, want);
    }
}

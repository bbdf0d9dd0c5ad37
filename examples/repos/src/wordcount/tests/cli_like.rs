//! Integration tests through the public API, the way a `wc`-like tool would use it.

use wordcount::{reading_minutes, top_n, wrap, Stats};

const TEXT: &str = "It was the best of times, it was the worst of times.\n\
It was the age of wisdom, it was the age of foolishness.\n";

#[test]
fn stats_of_a_paragraph() {
    let s = Stats::of(TEXT);
    assert_eq!(s.lines, 2);
    assert_eq!(s.words, 24);
    assert_eq!(s.sentences, 2);
}

#[test]
fn most_frequent_words() {
    let top = top_n(TEXT, 3);
    assert_eq!(top[0], ("it".to_string(), 4));
    assert_eq!(top[1], ("of".to_string(), 4));
    assert_eq!(top[2], ("the".to_string(), 4));
}

#[test]
fn wrapped_lines_fit() {
    for line in wrap(TEXT, 20) {
        assert!(line.chars().count() <= 20, "{line:?} is too long");
    }
}

#[test]
fn reading_time_of_a_paragraph() {
    assert_eq!(reading_minutes(Stats::of(TEXT).words, 200), 1);
}

use wordcount::{normalize_word, top_n, word_frequencies};

#[test]
fn non_ascii_capitals_are_lowercased() {
    assert_eq!(normalize_word("Élan"), Some("élan".to_string()));
    assert_eq!(normalize_word("ÜBER,"), Some("über".to_string()));
}

#[test]
fn accented_words_are_counted_together() {
    let f = word_frequencies("Über alles. über alles.");
    assert_eq!(f.get("über"), Some(&2));
    assert_eq!(f.get("alles"), Some(&2));
    assert_eq!(f.len(), 2);
}

#[test]
fn cyrillic_is_case_insensitive() {
    assert_eq!(top_n("Мир мир МИР world", 1), vec![("мир".to_string(), 3)]);
}

#[test]
fn ascii_is_still_case_insensitive() {
    assert_eq!(word_frequencies("The the THE")["the"], 3);
}

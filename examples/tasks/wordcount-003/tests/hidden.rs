use wordcount::wrap;

#[test]
fn a_line_of_exactly_width_fits() {
    assert_eq!(wrap("aaa bbb ccc", 7), vec!["aaa bbb", "ccc"]);
}

#[test]
fn whole_text_of_exactly_width() {
    assert_eq!(wrap("hello world", 11), vec!["hello world"]);
}

#[test]
fn pairs_of_words() {
    assert_eq!(wrap("ab cd ef gh", 5), vec!["ab cd", "ef gh"]);
}

#[test]
fn multibyte_words_count_characters() {
    assert_eq!(wrap("déjà vu éte", 7), vec!["déjà vu", "éte"]);
}

#[test]
fn lines_never_exceed_width() {
    let text = "the quick brown fox jumps over the lazy dog again and again";
    for width in 1..30 {
        for line in wrap(text, width) {
            let n = line.chars().count();
            assert!(n <= width || !line.contains(' '), "{line:?} longer than {width}");
        }
    }
}

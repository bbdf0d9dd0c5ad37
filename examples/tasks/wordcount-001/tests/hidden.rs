use wordcount::{count_lines, Stats};

#[test]
fn last_line_without_newline_counts() {
    assert_eq!(count_lines("a\nb"), 2);
}

#[test]
fn single_line_without_newline() {
    assert_eq!(count_lines("hello"), 1);
}

#[test]
fn crlf_without_trailing_newline() {
    assert_eq!(count_lines("a\r\nb"), 2);
}

#[test]
fn terminated_lines_are_unchanged() {
    assert_eq!(count_lines(""), 0);
    assert_eq!(count_lines("a\nb\n"), 2);
    assert_eq!(count_lines("\n"), 1);
}

#[test]
fn stats_of_an_unterminated_file() {
    let s = Stats::of("one two\nthree");
    assert_eq!((s.lines, s.words, s.chars), (2, 3, 13));
}

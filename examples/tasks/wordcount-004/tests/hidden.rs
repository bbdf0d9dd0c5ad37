use wordcount::truncate;

#[test]
fn accented_text_is_cut_by_characters() {
    assert_eq!(truncate("héllo wörld", 8), "héllo w…");
}

#[test]
fn text_that_fits_in_characters_is_unchanged() {
    assert_eq!(truncate("café", 4), "café");
    assert_eq!(truncate("日本語", 3), "日本語");
}

#[test]
fn cjk_text() {
    assert_eq!(truncate("日本語のテキスト", 4), "日本語…");
}

#[test]
fn emoji_do_not_panic() {
    assert_eq!(truncate("👍👍👍", 2), "👍…");
    assert_eq!(truncate("👍👍👍", 1), "…");
}

#[test]
fn result_never_exceeds_the_limit() {
    let text = "Crème brûlée, 日本, 👍 and more";
    for n in 0..40 {
        assert!(truncate(text, n).chars().count() <= n);
    }
}

use super::*;

#[test]
fn the_first_page_is_the_query_without_parameters() {
    assert_eq!(Query::first_page().sql(Plan::Keyset), FIRST_PAGE);
}

#[test]
fn the_etag_is_strong_and_tells_a_last_page_from_one_with_more() {
    let tag = etag(b"[]", false);
    assert!(tag.starts_with('"') && tag.ends_with('"') && tag.len() == 24);
    assert_eq!(tag, etag(b"[]", false));
    assert_ne!(tag, etag(b"[]", true));
    assert_ne!(tag, etag(b"[ ]", false));
}

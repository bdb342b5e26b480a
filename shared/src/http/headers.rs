//! The headers every answer carries, whatever built it (SPEC §23.10).

use lambda_http::http::{HeaderValue, StatusCode, header};
use lambda_http::{Body, Response};

/// The routes whose successful answers keep their own caching (SPEC
/// §23.10): the pages (`Cache-Control: no-cache` and an `ETag`), the
/// availability list (an `ETag`) and a slot.
const CACHEABLE: [&str; 5] = [
    "GET /console",
    "GET /docs",
    "GET /openapi.yaml",
    "GET /slots/availability",
    "GET /slots/{id}",
];

/// What every answer of `route` carries, added where each function's
/// answers leave (`serve`), so that no route, error or 404 goes without
/// them (SPEC §23.10): `X-Content-Type-Options: nosniff`, and
/// `Cache-Control: no-store` on all but the 200s and 304s of
/// [`CACHEABLE`] routes — a key `POST /clients` returns, a hold, an error
/// is never kept by a browser or a proxy. A `Cache-Control` the handler
/// set (the pages', `GET /events`') is left as it is.
pub fn finish(route: &str, mut response: Response<Body>) -> Response<Body> {
    let cached = CACHEABLE.contains(&route)
        && matches!(response.status(), StatusCode::OK | StatusCode::NOT_MODIFIED);
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if !cached && !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::http::{error_response, json};

    #[test]
    fn every_answer_is_nosniff_and_no_store_but_the_cacheable_routes_successes() {
        let header = |response: &Response<Body>, name| {
            response
                .headers()
                .get(name)
                .map(|v: &HeaderValue| v.to_str().unwrap().to_owned())
        };
        let ok = || json(StatusCode::OK, &serde_json::json!({"key": "k"}));
        let not_found = || error_response(&Error::NotFound("route"));
        let not_modified = || {
            let mut response = Response::new(Body::Empty);
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            response
        };
        let no_store = Some("no-store".to_owned());
        for (route, response, cache_control) in [
            ("POST /clients", ok(), no_store.clone()),
            ("GET /holds/{id}", ok(), no_store.clone()),
            ("$default", not_found(), no_store.clone()),
            ("GET /console", not_found(), no_store.clone()),
            ("GET /slots/availability", not_found(), no_store.clone()),
            ("GET /slots/{id}", not_found(), no_store.clone()),
            ("GET /slots/availability", ok(), None),
            ("GET /slots/availability", not_modified(), None),
            ("GET /slots/{id}", ok(), None),
            ("GET /openapi.yaml", not_modified(), None),
        ] {
            let response = finish(route, response);
            assert_eq!(
                header(&response, header::X_CONTENT_TYPE_OPTIONS).as_deref(),
                Some("nosniff"),
                "{route}"
            );
            assert_eq!(
                header(&response, header::CACHE_CONTROL),
                cache_control,
                "{route} {}",
                response.status()
            );
        }
        let mut page = ok();
        page.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        let page = finish("GET /console", page);
        assert_eq!(
            header(&page, header::CACHE_CONTROL).as_deref(),
            Some("no-cache")
        );
    }
}

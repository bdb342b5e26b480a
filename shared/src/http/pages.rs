//! The pages a person opens: the operator's console (`/console`), the API
//! reference (`/docs`) and the reference's source (`/openapi.yaml`).
//! Static files under `web/`, compiled into the binary (`include_str!`: no
//! file system at run time, no dependency, nothing to cold-start); no
//! database, no cache, no key: the console asks the API with the key the
//! person pastes, from the browser.
//!
//! Every file (and its 304) carries a Content-Security-Policy with no inline
//! script and no foreign origin, `frame-ancestors 'none'` and
//! `Referrer-Policy: no-referrer`; an `ETag` lets a browser keep what it
//! has. An unknown name is the API's JSON 404.
//!
//! The reference runs Redoc's bundle on the console's origin: a tab that
//! goes from the console to `/docs` gives that code the tab's
//! `sessionStorage`, the key included. The bundle is pinned by
//! `web/package-lock.json` and checked against it (`make browser`), and the
//! policy lets it reach no other origin; a deployment that wants the two
//! apart serves `/docs` from a domain of its own.

use super::{HandlerResult, error_response, route_path};
use crate::error::Error;
use lambda_http::http::{HeaderValue, StatusCode, header};
use lambda_http::{Body, Request, Response};
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

/// One file: its name in the URL and its text.
pub struct Asset {
    pub name: &'static str,
    pub text: &'static str,
    /// Its entity tag, made when the file is first asked for.
    tag: OnceLock<String>,
}

macro_rules! asset {
    ($dir:literal, $name:literal) => {
        Asset::new(
            $name,
            include_str!(concat!("../../../web/", $dir, "/", $name)),
        )
    };
}

impl Asset {
    const fn new(name: &'static str, text: &'static str) -> Self {
        Self {
            name,
            text,
            tag: OnceLock::new(),
        }
    }

    /// Its media type, by its name's extension.
    pub fn media_type(&self) -> &'static str {
        match self.name.rsplit_once('.').map(|(_, extension)| extension) {
            Some("html") => "text/html; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            Some("js") => "text/javascript; charset=utf-8",
            Some("svg") => "image/svg+xml",
            Some("txt") => "text/plain; charset=utf-8",
            Some("yaml") => "application/yaml",
            _ => "application/octet-stream",
        }
    }

    /// Its strong entity tag: the first 128 bits of its text's SHA-256,
    /// computed once per process.
    fn etag(&self) -> &str {
        self.tag.get_or_init(|| {
            let digest = Sha256::digest(self.text.as_bytes());
            format!("\"{}\"", hex::encode(&digest[..16]))
        })
    }
}

/// The console: the page at `/console`, every other file at
/// `/console/{name}` (the tests below hold this list to `web/console/`).
pub static CONSOLE: [Asset; 13] = [
    asset!("console", "index.html"),
    asset!("console", "console.css"),
    asset!("console", "icon.svg"),
    asset!("console", "main.js"),
    asset!("console", "api.js"),
    asset!("console", "ui.js"),
    asset!("console", "week.js"),
    asset!("console", "feed.js"),
    asset!("console", "holds.js"),
    asset!("console", "detail.js"),
    asset!("console", "admin.js"),
    asset!("console", "clients.js"),
    asset!("console", "webhooks.js"),
];

/// The reference: Redoc's standalone bundle (`web/package-lock.json` pins
/// it; `make browser` checks the copy here against it) and the two files
/// that start it on `/openapi.yaml`.
pub static DOCS: [Asset; 5] = [
    asset!("docs", "index.html"),
    asset!("docs", "docs.js"),
    asset!("docs", "docs.css"),
    asset!("docs", "redoc.standalone.js"),
    asset!("docs", "redoc.standalone.js.LICENSE.txt"),
];

/// The contract, as the repository holds it.
pub static OPENAPI: Asset = Asset::new("openapi.yaml", include_str!("../../../openapi.yaml"));

/// The console's policy: its own scripts, styles and API, nothing else;
/// Trusted Types with no policy, so the browser refuses any HTML sink
/// (`innerHTML` and the like) the code might come to use.
pub const CONSOLE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'";

/// Redoc's: its styles are injected at run time (styled-components), its
/// icons are `data:` images and its search runs in a worker its bundle
/// makes from a `blob:`; still no inline script and no other origin (the
/// Redocly logo its menu asks cdn.redoc.ly for is refused).
pub const DOCS_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; \
     worker-src blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// A document that is not a page runs nothing.
const DOCUMENT_POLICY: &str = "default-src 'none'; frame-ancestors 'none'";

/// `GET /console` and `GET /console/{name}`.
pub async fn console_page(request: Request) -> HandlerResult {
    Ok(serve_from(&request, "/console", &CONSOLE, CONSOLE_POLICY))
}

/// `GET /docs` and `GET /docs/{name}`.
pub async fn docs_page(request: Request) -> HandlerResult {
    Ok(serve_from(&request, "/docs", &DOCS, DOCS_POLICY))
}

/// `GET /openapi.yaml`.
pub async fn openapi_document(request: Request) -> HandlerResult {
    Ok(answer(&request, &OPENAPI, DOCUMENT_POLICY))
}

/// The page at `root`, or the file named by the one segment after it.
fn serve_from(request: &Request, root: &str, assets: &[Asset], policy: &str) -> Response<Body> {
    let path = route_path(request);
    let name = match path.strip_prefix(root) {
        Some("") => Some("index.html"),
        Some(rest) => rest.strip_prefix('/').filter(|name| *name != "index.html"),
        None => None,
    };
    match name.and_then(|name| assets.iter().find(|asset| asset.name == name)) {
        Some(asset) => answer(request, asset, policy),
        None => error_response(&Error::NotFound("route")),
    }
}

fn answer(request: &Request, asset: &Asset, policy: &str) -> Response<Body> {
    let tag = asset.etag();
    let fresh = request
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|tags| {
            tags.split(',')
                .any(|t| t.trim().trim_start_matches("W/") == tag)
        });
    let mut response = if fresh {
        let mut response = Response::new(Body::Empty);
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        response
    } else {
        Response::new(Body::Text(asset.text.to_owned()))
    };
    let headers = response.headers_mut();
    let mut set = |name, value: &str| {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    };
    set(header::CONTENT_TYPE, asset.media_type());
    set(header::CONTENT_SECURITY_POLICY, policy);
    set(header::REFERRER_POLICY, "no-referrer");
    set(header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    // Kept, but asked again each time: a deploy shows at once.
    set(header::CACHE_CONTROL, "no-cache");
    set(header::ETAG, tag);
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    fn now_or_never(answer: impl Future<Output = HandlerResult>) -> Option<HandlerResult> {
        answer.now_or_never()
    }

    fn get(path: &str, tag: Option<&str>) -> Response<Body> {
        let mut request = lambda_http::http::Request::builder().uri(path);
        if let Some(tag) = tag {
            request = request.header(header::IF_NONE_MATCH, tag);
        }
        let request: Request = request.body(Body::Empty).expect("a request");
        let answer = if path.starts_with("/console") {
            now_or_never(console_page(request))
        } else if path.starts_with("/docs") {
            now_or_never(docs_page(request))
        } else {
            now_or_never(openapi_document(request))
        };
        answer.expect("no await").expect("an answer")
    }

    fn header_of(response: &Response<Body>, name: header::HeaderName) -> &str {
        response.headers()[name].to_str().expect("text")
    }

    /// A file added to `web/console` or `web/docs` and not listed here would
    /// be a 404 in production; one listed and removed would not compile.
    #[test]
    fn every_file_of_the_pages_is_served_and_nothing_else() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../web");
        for (dir, assets) in [("console", &CONSOLE[..]), ("docs", &DOCS[..])] {
            let mut on_disk: Vec<String> = std::fs::read_dir(root.join(dir))
                .expect("the directory")
                .map(|entry| {
                    entry
                        .expect("an entry")
                        .file_name()
                        .into_string()
                        .expect("utf-8")
                })
                .collect();
            let mut listed: Vec<String> = assets.iter().map(|a| a.name.to_owned()).collect();
            on_disk.sort();
            listed.sort();
            assert_eq!(on_disk, listed, "web/{dir}");
            for asset in assets {
                assert_ne!(
                    asset.media_type(),
                    "application/octet-stream",
                    "{}",
                    asset.name
                );
            }
        }
    }

    /// The headers every file and its 304 carry.
    fn assert_strict(response: &Response<Body>, path: &str, policy: &str) {
        assert_eq!(
            header_of(response, header::CONTENT_SECURITY_POLICY),
            policy,
            "{path}"
        );
        assert_eq!(header_of(response, header::REFERRER_POLICY), "no-referrer");
        assert_eq!(
            header_of(response, header::X_CONTENT_TYPE_OPTIONS),
            "nosniff"
        );
        assert_eq!(header_of(response, header::CACHE_CONTROL), "no-cache");
    }

    #[test]
    fn a_page_its_files_and_the_contract_carry_strict_headers_and_an_etag() {
        for (path, policy) in [
            ("/console", CONSOLE_POLICY),
            ("/console/main.js", CONSOLE_POLICY),
            ("/docs", DOCS_POLICY),
            ("/docs/docs.js", DOCS_POLICY),
            ("/openapi.yaml", DOCUMENT_POLICY),
        ] {
            let response = get(path, None);
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            assert_strict(&response, path, policy);
            let tag = header_of(&response, header::ETAG).to_owned();
            assert_eq!(tag.len(), 34, "{path}: {tag}");
            // Another file's tag, or none that matches, is the file again.
            for stale in ["\"other\"", "\"\"", "W/\"other\", \"\""] {
                assert_eq!(
                    get(path, Some(stale)).status(),
                    StatusCode::OK,
                    "{path} {stale}"
                );
            }
            let again = get(path, Some(&format!("\"other\", W/{tag}")));
            assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{path}");
            assert!(matches!(again.body(), Body::Empty));
            assert_eq!(header_of(&again, header::ETAG), tag, "{path}");
            assert_strict(&again, path, policy);
        }
        for policy in [CONSOLE_POLICY, DOCS_POLICY, DOCUMENT_POLICY] {
            let script = policy
                .split(';')
                .map(str::trim)
                .find(|d| d.starts_with("script-src"));
            assert!(
                matches!(script, None | Some("script-src 'self'")),
                "{policy}"
            );
            assert!(
                policy.contains("default-src 'none'") && policy.contains("frame-ancestors 'none'")
            );
        }
        let tags: std::collections::HashSet<&str> =
            CONSOLE.iter().chain(&DOCS).map(Asset::etag).collect();
        assert_eq!(tags.len(), CONSOLE.len() + DOCS.len(), "one tag per file");
        assert_eq!(
            header_of(&get("/console", None), header::CONTENT_TYPE),
            "text/html; charset=utf-8"
        );
        assert_eq!(
            header_of(&get("/openapi.yaml", None), header::CONTENT_TYPE),
            "application/yaml"
        );
    }

    #[test]
    fn a_name_the_page_does_not_have_is_a_404_in_the_apis_format() {
        for path in [
            "/console/",
            "/console/index.html",
            "/console/nothing.js",
            "/console/../openapi.yaml",
            "/docs/main.js",
            "/consoles",
        ] {
            let response = get(path, None);
            assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
            assert_eq!(
                header_of(&response, header::CONTENT_TYPE),
                "application/json"
            );
        }
    }
}

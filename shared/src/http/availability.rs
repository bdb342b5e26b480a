//! `GET /slots/availability` (SPEC §4, §11): its query parameters, the
//! `Link` to the next page, the `ETag` and `If-None-Match`.

use super::{HandlerResult, error_response, json_bytes, link_next};
use crate::App;
use crate::cache::{CacheStatus, Served};
use crate::clients::Needs;
use crate::domain::parse_instant;
use crate::error::{Error, FieldErrors, sent_name};
use crate::slots::availability::{DEFAULT_SCAN, MAX_LIMIT, Query};
use crate::slots::cursor::{Cursor, CursorError, Filters};
use crate::telemetry::{self, Metric};
use chrono::SecondsFormat;
use lambda_http::http::{HeaderMap, HeaderValue, StatusCode, header};
use lambda_http::{Body, Request, Response};
use std::time::Duration;

/// `GET /slots/availability`. Without parameters: the first page of the
/// slots that have not ended, through the cache, the rate limit checked
/// in the cache read's own round trip. With parameters: the page asked
/// for, from the database. `X-Cache` tells how it was served (hit, stale,
/// miss, bypass), `Age` how old the figures are, in seconds; `Link` leads
/// to the next page; `If-None-Match` matching the `ETag` gives a 304.
pub async fn availability(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let deadline = super::deadline(&request);
        let parameters = super::query_pairs(&request);
        if parameters.is_empty() {
            let caller = app
                .gate
                .identify(
                    super::authorization(&request),
                    Needs::Booker,
                    deadline.into(),
                )
                .await?;
            let served = app
                .booking
                .until(deadline)
                .availability_json(caller.limit())
                .await?;
            return Ok((served, Query::first_page()));
        }
        // Authentication (and the rate limit) before any other check.
        super::caller(app, &request, Needs::Booker).await?;
        let query = parse_query(&parameters)?;
        let page = app.slots.until(deadline).availability(&query).await?;
        let served = Served {
            page,
            status: CacheStatus::Bypass,
            age: Duration::ZERO,
        };
        Ok((served, query))
    }
    .await;
    Ok(match outcome {
        Ok((served, query)) => respond(&request, served, &query),
        Err(err) => error_response(&err),
    })
}

fn respond(request: &Request, served: Served, query: &Query) -> Response<Body> {
    let Served { page, status, age } = served;
    telemetry::count(
        match status {
            CacheStatus::Hit => Metric::CacheHit,
            CacheStatus::Stale => Metric::CacheStale,
            CacheStatus::Miss => Metric::CacheMiss,
            CacheStatus::Bypass => Metric::CacheBypass,
        },
        1,
    );
    let fresh = none_match(request.headers(), &page.etag);
    let mut response = if fresh {
        let mut response = Response::new(Body::Empty);
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        response
    } else {
        json_bytes(StatusCode::OK, page.body)
    };
    let headers = response.headers_mut();
    headers.insert("x-cache", HeaderValue::from_static(status.as_str()));
    headers.insert(header::AGE, HeaderValue::from(age.as_secs()));
    if let Ok(etag) = HeaderValue::from_str(&page.etag) {
        headers.insert(header::ETAG, etag);
    }
    if let Some(cursor) = page.next {
        link_next(request, &next_query(query, &cursor), &mut response);
    }
    response
}

/// The next page's parameters: every filter, the limit and the new
/// cursor.
fn next_query(query: &Query, cursor: &str) -> String {
    let mut link = String::new();
    let at = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(SecondsFormat::Micros, true);
    if let Some(from) = query.filters.from {
        link.push_str(&format!("from={}&", at(from)));
    }
    if let Some(to) = query.filters.to {
        link.push_str(&format!("to={}&", at(to)));
    }
    if query.filters.available {
        link.push_str("available=true&");
    }
    link.push_str(&format!("limit={}&cursor={cursor}", query.limit));
    link
}

const NAMES: [&str; 5] = ["from", "to", "available", "limit", "cursor"];

/// The parameters, validated: every problem is reported at once, each
/// under the parameter's name (an unknown one too). A cursor is checked
/// against the filters sent with it.
pub(super) fn parse_query(parameters: &[(String, String)]) -> Result<Query, Error> {
    let mut errors = FieldErrors::new();
    let mut given: [Option<&str>; 5] = [None; 5];
    for (name, value) in parameters {
        match NAMES.iter().position(|known| known == name) {
            Some(i) if given[i].is_some() => add(
                &mut errors,
                NAMES[i],
                format!("The {} parameter may be given only once.", NAMES[i]),
            ),
            Some(i) => given[i] = Some(value),
            None => {
                let name = sent_name(name);
                let message = format!(
                    "The {name:?} parameter is not allowed; use from, to, available, limit or \
                     cursor."
                );
                errors.entry(name.into()).or_default().push(message);
            }
        }
    }
    let [from, to, available, limit, cursor] = given;
    let mut instant = |field: &'static str, raw: Option<&str>| {
        let parsed = raw.map(parse_instant).transpose();
        parsed.unwrap_or_else(|why| {
            add(&mut errors, field, format!("The {field} parameter {why}."));
            None
        })
    };
    let from = instant("from", from);
    let to = instant("to", to);
    if let (Some(from), Some(to)) = (from, to)
        && from >= to
    {
        add(
            &mut errors,
            "to",
            "The to parameter must be later than from.".into(),
        );
    }
    let available = match available {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            add(
                &mut errors,
                "available",
                "The available parameter must be true or false.".into(),
            );
            false
        }
    };
    let limit = match limit {
        None => MAX_LIMIT,
        Some(raw) => match parse_limit(raw) {
            Some(limit) => limit,
            None => {
                add(
                    &mut errors,
                    "limit",
                    format!("The limit parameter must be an integer from 1 to {MAX_LIMIT}."),
                );
                MAX_LIMIT
            }
        },
    };
    let filters = Filters {
        from,
        to,
        available,
    };
    // A cursor is judged against valid filters only: with a bad filter the
    // filter is the problem.
    let cursor = match cursor {
        Some(raw) if errors.is_empty() => match Cursor::decode(raw, &filters) {
            Ok(cursor) => Some(cursor),
            Err(CursorError::Unknown) => {
                add(
                    &mut errors,
                    "cursor",
                    "The cursor is not one this server issued; follow the next link as it was \
                     sent."
                        .into(),
                );
                None
            }
            Err(CursorError::OtherFilters) => {
                add(
                    &mut errors,
                    "cursor",
                    "The cursor was issued for other from, to or available parameters; send it \
                     with the filters of the page that linked to it."
                        .into(),
                );
                None
            }
        },
        _ => None,
    };
    if errors.is_empty() {
        // The scan limit is the slot service's (`Slots::availability`).
        Ok(Query {
            filters,
            limit,
            cursor,
            scan: DEFAULT_SCAN,
        })
    } else {
        Err(Error::Validation(errors))
    }
}

fn add(errors: &mut FieldErrors, field: &'static str, message: String) {
    errors.entry(field.into()).or_default().push(message);
}

/// 1 to [`MAX_LIMIT`], decimal digits only.
fn parse_limit(raw: &str) -> Option<u32> {
    if raw.is_empty() || raw.len() > 4 || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    raw.parse().ok().filter(|n| (1..=MAX_LIMIT).contains(n))
}

/// Whether `If-None-Match` matches `etag` (RFC 9110 §13.1.2): `*`, or a
/// list of entity tags of which one matches weakly (`W/"x"` matches
/// `"x"`). Every `If-None-Match` header counts; a malformed member matches
/// nothing.
pub(super) fn none_match(headers: &HeaderMap, etag: &str) -> bool {
    let ours = etag.trim_start_matches("W/");
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| list_matches(value, ours))
}

fn list_matches(mut list: &str, ours: &str) -> bool {
    loop {
        list = list.trim_start_matches([' ', '\t', ',']);
        if list.is_empty() {
            return false;
        }
        if let Some(rest) = list.strip_prefix('*') {
            if rest.trim_start_matches([' ', '\t']).is_empty() || rest.starts_with([' ', '\t', ','])
            {
                return true;
            }
            return false;
        }
        let tag = list.strip_prefix("W/").unwrap_or(list);
        let Some(body) = tag.strip_prefix('"') else {
            return false;
        };
        let Some(end) = body.find('"') else {
            return false;
        };
        if tag[..end + 2] == *ours {
            return true;
        }
        list = &body[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(raw: &[(&str, &str)]) -> Vec<(String, String)> {
        raw.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn fields(raw: &[(&str, &str)]) -> Vec<String> {
        match parse_query(&pairs(raw)).unwrap_err() {
            Error::Validation(errors) => errors.keys().map(|k| k.to_string()).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_bad_parameter_is_named() {
        assert_eq!(fields(&[("from", "2026-12-01 09:00:00Z")]), ["from"]);
        assert_eq!(fields(&[("to", "tomorrow")]), ["to"]);
        assert_eq!(
            fields(&[
                ("from", "2026-12-02T00:00:00Z"),
                ("to", "2026-12-02T01:00:00+01:00")
            ]),
            ["to"]
        );
        for bad in ["yes", "1", "TRUE", ""] {
            assert_eq!(fields(&[("available", bad)]), ["available"], "{bad}");
        }
        for bad in ["0", "1001", "-1", "+5", "1e3", "", "10.0", "99999999999"] {
            assert_eq!(fields(&[("limit", bad)]), ["limit"], "{bad}");
        }
        assert_eq!(fields(&[("cursor", "nope")]), ["cursor"]);
        assert_eq!(fields(&[("limit", "5"), ("limit", "5")]), ["limit"]);
        assert_eq!(fields(&[("page", "2"), ("from", "x")]), ["from", "page"]);
    }

    #[test]
    fn good_parameters_make_a_query() {
        let query = parse_query(&pairs(&[
            ("to", "2027-01-01T00:00:00Z"),
            ("available", "true"),
            ("limit", "7"),
        ]))
        .unwrap();
        assert_eq!(query.limit, 7);
        assert!(query.filters.available && query.filters.from.is_none());
        assert!(query.cursor.is_none());
        let all = parse_query(&pairs(&[("limit", "1000"), ("available", "false")])).unwrap();
        assert_eq!(all.limit, 1000);
        assert!(!all.filters.available);
    }

    #[test]
    fn if_none_match_is_a_list_compared_weakly() {
        let ours = "\"abc\"";
        for matching in [
            "\"abc\"",
            "W/\"abc\"",
            "\"x\", \"abc\"",
            "\"x\",W/\"abc\"",
            "*",
            " * ",
            "\"a,b\", \"abc\"",
        ] {
            assert!(list_matches(matching, ours), "{matching}");
        }
        for other in ["\"abd\"", "abc", "\"abc", "", "W/abc", "**", "\"ab\"c\""] {
            assert!(!list_matches(other, ours), "{other}");
        }
    }
}

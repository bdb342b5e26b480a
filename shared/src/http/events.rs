//! `GET /events?after=&limit=` (SPEC §12): a page of the change feed and,
//! always, the `Link` to the next one (the same cursor when nothing is
//! new: poll it) and to the feed's head (`rel="last"`: from there, only
//! what happens next, without walking the feed to find it).

use super::{HandlerResult, caller, error_response, json, links};
use crate::App;
use crate::clients::Needs;
use crate::error::{Error, FieldErrors, sent_name};
use crate::events::{CursorError, EventCursor};
use lambda_http::Request;
use lambda_http::http::{HeaderValue, StatusCode, header};
use std::borrow::Cow;

/// Events per page: `limit` 1 to this, 100 when absent.
pub const MAX_EVENTS: u32 = 500;
const DEFAULT_EVENTS: u32 = 100;

/// `GET /events`
pub async fn list_events(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = caller(app, &request, Needs::Booker).await?;
        let (after, limit) = parse(&super::query_pairs(&request))?;
        let page = app
            .feed
            .until(super::deadline(&request))
            .page(&caller, after, limit)
            .await?;
        Ok::<_, Error>((page, limit))
    }
    .await;
    Ok(match outcome {
        Ok((page, limit)) => {
            let mut response = json(StatusCode::OK, &page.events);
            let next = format!("after={}&limit={limit}", page.next.encode());
            let last = format!("after={}&limit={limit}", page.head.encode());
            links(&request, &[(&next, "next"), (&last, "last")], &mut response);
            let headers = response.headers_mut();
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(err) => error_response(&err),
    })
}

/// `after` (a cursor the server issued) and `limit`; every problem at
/// once, each under its parameter, an unknown one too. A cursor not issued
/// here is reported under `cursor` (SPEC §15.12).
fn parse(parameters: &[(String, String)]) -> Result<(Option<EventCursor>, u32), Error> {
    let mut errors = FieldErrors::new();
    let mut add = |field: Cow<'static, str>, message: String| {
        errors.entry(field).or_default().push(message);
    };
    let (mut after, mut limit) = (None, None);
    for (name, value) in parameters {
        let slot = match name.as_str() {
            "after" => &mut after,
            "limit" => &mut limit,
            other => {
                let name = sent_name(other);
                let message = format!("The {name:?} parameter is not allowed; use after or limit.");
                add(name.into(), message);
                continue;
            }
        };
        if slot.replace(value.as_str()).is_some() {
            add(
                if name == "after" { "after" } else { "limit" }.into(),
                format!("The {name} parameter may be given only once."),
            );
        }
    }
    let limit = match limit {
        None => DEFAULT_EVENTS,
        Some(raw) => {
            let parsed =
                (!raw.is_empty() && raw.len() <= 4 && raw.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| raw.parse::<u32>().ok())
                    .flatten()
                    .filter(|n| (1..=MAX_EVENTS).contains(n));
            parsed.unwrap_or_else(|| {
                add(
                    "limit".into(),
                    format!("The limit parameter must be an integer from 1 to {MAX_EVENTS}."),
                );
                DEFAULT_EVENTS
            })
        }
    };
    let after = match after.map(EventCursor::decode) {
        None => None,
        Some(Ok(cursor)) => Some(cursor),
        Some(Err(CursorError::Unknown | CursorError::Expired)) => {
            add(
                "cursor".into(),
                "The after parameter is not a cursor this server issued; follow the next link \
                 as it was sent, or leave after out to start from the oldest event kept."
                    .into(),
            );
            None
        }
    };
    if errors.is_empty() {
        Ok((after, limit))
    } else {
        Err(Error::Validation(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(query: &[(&str, &str)]) -> Vec<(String, String)> {
        query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn after_and_limit_are_read_and_every_problem_reported() {
        let cursor = EventCursor { after: 9 };
        assert_eq!(parse(&[]).unwrap(), (None, 100));
        assert_eq!(
            parse(&pairs(&[("after", &cursor.encode()), ("limit", "500")])).unwrap(),
            (Some(cursor), 500)
        );
        for (query, fields) in [
            (vec![("limit", "0")], vec!["limit"]),
            (vec![("limit", "501")], vec!["limit"]),
            (vec![("limit", "+5")], vec!["limit"]),
            (vec![("limit", "")], vec!["limit"]),
            (vec![("after", "xyz")], vec!["cursor"]),
            (vec![("after", "")], vec!["cursor"]),
            (vec![("cursor", "x")], vec!["cursor"]),
            (vec![("limit", "1"), ("limit", "2")], vec!["limit"]),
            (
                vec![("after", "x"), ("limit", "a"), ("b", "")],
                vec!["b", "cursor", "limit"],
            ),
        ] {
            let Err(Error::Validation(errors)) = parse(&pairs(&query)) else {
                panic!("{query:?} accepted");
            };
            let got: Vec<&str> = errors.keys().map(|k| k.as_ref()).collect();
            assert_eq!(got, fields, "{query:?}");
        }
    }
}

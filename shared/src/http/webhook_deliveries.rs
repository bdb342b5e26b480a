//! A subscription's deliveries and its ping (SPEC §20, §23.11): like the
//! rest of `/webhooks`, any keyed client's own; an admin's reach every
//! client's; another's is a 404.

use super::webhooks::{keyed, webhook_id};
use super::{HandlerResult, deadline, error_response, json, link_next, query_pairs};
use crate::App;
use crate::error::{Error, FieldErrors, sent_name};
use crate::webhooks::DeliveryCursor;
use crate::webhooks::page::{DEFAULT_WEBHOOKS, MAX_WEBHOOKS};
use lambda_http::Request;
use lambda_http::http::StatusCode;

/// `GET /webhooks/{id}/deliveries?limit=&cursor=` → 200 + a page, newest
/// first; `Link: <…>; rel="next"` when more follow.
pub async fn list_webhook_deliveries(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = keyed(app, &request).await?;
        let id = webhook_id(&request, &["webhooks", "{id}", "deliveries"])?;
        let (before, limit) = parse(&query_pairs(&request))?;
        let page = app
            .webhooks
            .deliveries(&caller, id, before, limit, deadline(&request).into())
            .await?;
        Ok::<_, Error>((page, limit))
    }
    .await;
    Ok(match outcome {
        Ok((page, limit)) => {
            let mut response = json(StatusCode::OK, &page.deliveries);
            if let Some(next) = page.next {
                let link = format!("limit={limit}&cursor={}", next.encode());
                link_next(&request, &link, &mut response);
            }
            response
        }
        Err(err) => error_response(&err),
    })
}

/// `POST /webhooks/{id}/ping` → 200 `{"status_code", "latency_ms",
/// "error"}`, whatever the receiver answered (or not). No body is read.
pub async fn ping_webhook(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = keyed(app, &request).await?;
        let id = webhook_id(&request, &["webhooks", "{id}", "ping"])?;
        app.webhooks
            .ping(&caller, id, deadline(&request).into())
            .await
    }
    .await;
    Ok(match outcome {
        Ok(answer) => json(StatusCode::OK, &answer),
        Err(err) => error_response(&err),
    })
}

/// `limit` (1–1000, 100 when absent) and `cursor`, as `GET /webhooks`;
/// every problem at once, each under its parameter, an unknown or
/// repeated one too.
fn parse(parameters: &[(String, String)]) -> Result<(Option<DeliveryCursor>, u32), Error> {
    let mut errors = FieldErrors::new();
    let (mut before, mut limit) = (None, DEFAULT_WEBHOOKS);
    let mut seen = [false; 2];
    for (name, value) in parameters {
        let mut fail = |message: String| {
            errors
                .entry(sent_name(name).into())
                .or_default()
                .push(message)
        };
        let index = match name.as_str() {
            "limit" => 0,
            "cursor" => 1,
            other => {
                fail(format!(
                    "The {:?} parameter is not allowed; use limit or cursor.",
                    sent_name(other)
                ));
                continue;
            }
        };
        if std::mem::replace(&mut seen[index], true) {
            fail(format!("The {name} parameter may be given only once."));
            continue;
        }
        if index == 0 {
            match value.parse::<u32>() {
                Ok(n) if (1..=MAX_WEBHOOKS).contains(&n) && !value.starts_with('+') => limit = n,
                _ => fail(format!(
                    "The limit parameter must be an integer from 1 to {MAX_WEBHOOKS}."
                )),
            }
        } else {
            match DeliveryCursor::decode(value) {
                Some(cursor) => before = Some(cursor),
                None => fail(
                    "The cursor is not one this server issued; follow the next link as it was \
                     given."
                        .into(),
                ),
            }
        }
    }
    if errors.is_empty() {
        Ok((before, limit))
    } else {
        Err(Error::Validation(errors))
    }
}

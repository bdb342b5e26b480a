//! `/webhooks` (SPEC §20, §23.11): any client's own subscriptions; an
//! admin's reach every client's. A subscription needs a key: `open` mode's
//! anonymous client has none, and none to be told its secret by.

use super::{
    HandlerResult, body_limit, caller, deadline, error_response, json, json_body, link_next,
    path_id, query_pairs,
};
use crate::App;
use crate::clients::{ANONYMOUS, Caller, ClientId, Needs};
use crate::error::{Error, FieldErrors, Unauthenticated, sent_name};
use crate::webhooks::page::{DEFAULT_WEBHOOKS, MAX_WEBHOOKS};
use crate::webhooks::{NewSubscription, Subscription, SubscriptionPatch, WebhookCursor, WebhookId};
use lambda_http::Request;
use lambda_http::http::StatusCode;

/// `POST /webhooks` → 201 + the subscription, with its `secret` (shown
/// only here and in a rotation's answer).
pub async fn create_webhook(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = keyed(app, &request).await?;
        let body = json_body(&request, body_limit::ADMIN)?;
        let new = NewSubscription::from_json(&body, app.webhooks.rules())?;
        app.webhooks
            .create(&caller, &new, deadline(&request).into())
            .await
    }
    .await;
    answer(StatusCode::CREATED, outcome)
}

/// `GET /webhooks?limit=&cursor=&client_id=` → 200 + a page, oldest
/// first; `Link: <…>; rel="next"` when more follow.
pub async fn list_webhooks(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = keyed(app, &request).await?;
        let query = parse(&query_pairs(&request))?;
        let page = app
            .webhooks
            .page(
                &caller,
                query.client,
                query.after,
                query.limit,
                deadline(&request).into(),
            )
            .await?;
        Ok::<_, Error>((page, query))
    }
    .await;
    Ok(match outcome {
        Ok((page, query)) => {
            let mut response = json(StatusCode::OK, &page.subscriptions);
            if let Some(next) = page.next {
                let mut link = format!("limit={}&cursor={}", query.limit, next.encode());
                if let Some(client) = query.client {
                    link.push_str(&format!("&client_id={client}"));
                }
                link_next(&request, &link, &mut response);
            }
            response
        }
        Err(err) => error_response(&err),
    })
}

/// `GET /webhooks/{id}`.
pub async fn get_webhook(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = keyed(app, &request).await?;
        let id = webhook_id(&request, &["webhooks", "{id}"])?;
        app.webhooks
            .get(&caller, id, deadline(&request).into())
            .await
    }
    .await;
    answer(StatusCode::OK, outcome)
}

/// `PATCH /webhooks/{id}` → 200 + the subscription as it is now.
pub async fn patch_webhook(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = keyed(app, &request).await?;
        let id = webhook_id(&request, &["webhooks", "{id}"])?;
        let body = json_body(&request, body_limit::ADMIN)?;
        let patch = SubscriptionPatch::from_json(&body, app.webhooks.rules())?;
        app.webhooks
            .patch(&caller, id, &patch, deadline(&request).into())
            .await
    }
    .await;
    answer(StatusCode::OK, outcome)
}

/// `DELETE /webhooks/{id}` → 200 + the subscription as it was.
pub async fn delete_webhook(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = keyed(app, &request).await?;
        let id = webhook_id(&request, &["webhooks", "{id}"])?;
        app.webhooks
            .delete(&caller, id, deadline(&request).into())
            .await
    }
    .await;
    answer(StatusCode::OK, outcome)
}

/// `POST /webhooks/{id}/secret` → 200 + the subscription with its new
/// `secret`; the old one signs too for 24 h.
pub async fn rotate_webhook_secret(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        let caller = keyed(app, &request).await?;
        let id = webhook_id(&request, &["webhooks", "{id}", "secret"])?;
        // No body is read: any is ignored, as a confirm's.
        app.webhooks
            .rotate(&caller, id, deadline(&request).into())
            .await
    }
    .await;
    answer(StatusCode::OK, outcome)
}

fn answer(status: StatusCode, outcome: Result<Subscription, Error>) -> HandlerResult {
    Ok(match outcome {
        Ok(subscription) => json(status, &subscription),
        Err(err) => error_response(&err),
    })
}

/// The caller, who must have a key: in `open` mode a request without one
/// is anonymous, who has no webhooks.
pub(super) async fn keyed(app: &App, request: &Request) -> Result<Caller, Error> {
    let caller = caller(app, request, Needs::Booker).await?;
    if caller.id == ANONYMOUS {
        return Err(Error::Unauthenticated(Unauthenticated::Missing));
    }
    Ok(caller)
}

pub(super) fn webhook_id(request: &Request, route: &[&str]) -> Result<WebhookId, Error> {
    path_id(request, route)
        .and_then(WebhookId::parse)
        .ok_or(Error::NotFound("webhook"))
}

struct ListQuery {
    after: Option<WebhookCursor>,
    limit: u32,
    client: Option<ClientId>,
}

/// `limit` (1–1000, 100 when absent), `cursor` and `client_id`; every
/// problem at once, each under its parameter, an unknown one too.
fn parse(parameters: &[(String, String)]) -> Result<ListQuery, Error> {
    let mut errors = FieldErrors::new();
    let mut query = ListQuery {
        after: None,
        limit: DEFAULT_WEBHOOKS,
        client: None,
    };
    let mut seen = [false; 3];
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
            "client_id" => 2,
            other => {
                fail(format!(
                    "The {:?} parameter is not allowed; use limit, cursor or client_id.",
                    sent_name(other)
                ));
                continue;
            }
        };
        if std::mem::replace(&mut seen[index], true) {
            fail(format!("The {name} parameter may be given only once."));
            continue;
        }
        match index {
            0 => match value.parse::<u32>() {
                Ok(n) if (1..=MAX_WEBHOOKS).contains(&n) && !value.starts_with('+') => {
                    query.limit = n
                }
                _ => fail(format!(
                    "The limit parameter must be an integer from 1 to {MAX_WEBHOOKS}."
                )),
            },
            1 => match WebhookCursor::decode(value) {
                Some(cursor) => query.after = Some(cursor),
                None => fail(
                    "The cursor is not one this server issued; follow the next link as it was \
                     given."
                        .into(),
                ),
            },
            _ => match ClientId::parse(value) {
                Some(client) => query.client = Some(client),
                None => fail("The client_id parameter must be a client's id.".into()),
            },
        }
    }
    if errors.is_empty() {
        Ok(query)
    } else {
        Err(Error::Validation(errors))
    }
}

//! `POST /clients`, `GET /clients`, `PATCH /clients/{id}`,
//! `DELETE /clients/{id}`: admins only.

use super::{
    HandlerResult, body_limit, caller, deadline, error_response, json, json_body, link_next,
    path_id,
};
use crate::App;
use crate::clients::page::{DEFAULT_CLIENTS, MAX_CLIENTS};
use crate::clients::{ClientCursor, ClientId, ClientPatch, Needs, NewClient};
use crate::error::{Error, FieldErrors, sent_name};
use lambda_http::Request;
use lambda_http::http::StatusCode;

/// `POST /clients` → 201 + the client, with its key (shown only here).
pub async fn create_client(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        caller(app, &request, Needs::Admin).await?;
        let new = NewClient::from_json(&json_body(&request, body_limit::ADMIN)?)?;
        app.clients.create(&new, deadline(&request).into()).await
    }
    .await;
    Ok(match outcome {
        Ok(client) => json(StatusCode::CREATED, &client),
        Err(err) => error_response(&err),
    })
}

/// `GET /clients?limit=&cursor=` → 200 + a page of clients, oldest first,
/// without keys; `Link: <…>; rel="next"` when more follow.
pub async fn list_clients(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        caller(app, &request, Needs::Admin).await?;
        let (after, limit) = parse(&super::query_pairs(&request))?;
        let page = app
            .clients
            .page(after, limit, deadline(&request).into())
            .await?;
        Ok::<_, Error>((page, limit))
    }
    .await;
    Ok(match outcome {
        Ok((page, limit)) => {
            let mut response = json(StatusCode::OK, &page.clients);
            if let Some(next) = page.next {
                let query = format!("limit={limit}&cursor={}", next.encode());
                link_next(&request, &query, &mut response);
            }
            response
        }
        Err(err) => error_response(&err),
    })
}

/// `limit` (1–1000, 100 when absent) and `cursor`; every problem at once,
/// each under its parameter, an unknown one too.
fn parse(parameters: &[(String, String)]) -> Result<(Option<ClientCursor>, u32), Error> {
    let mut errors = FieldErrors::new();
    let (mut limit, mut cursor) = (DEFAULT_CLIENTS, None);
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
                Ok(n) if (1..=MAX_CLIENTS).contains(&n) && !value.starts_with('+') => limit = n,
                _ => fail(format!(
                    "The limit parameter must be an integer from 1 to {MAX_CLIENTS}."
                )),
            }
        } else {
            match ClientCursor::decode(value) {
                Some(decoded) => cursor = Some(decoded),
                None => fail(
                    "The cursor is not one this server issued; follow the next link as it was \
                     given."
                        .into(),
                ),
            }
        }
    }
    if errors.is_empty() {
        Ok((cursor, limit))
    } else {
        Err(Error::Validation(errors))
    }
}

/// `PATCH /clients/{id}` → 200 + the client with its new limits.
pub async fn patch_client(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        caller(app, &request, Needs::Admin).await?;
        let id = client_id(&request)?;
        let patch = ClientPatch::from_json(&json_body(&request, body_limit::ADMIN)?)?;
        app.clients
            .patch(id, &patch, deadline(&request).into())
            .await
    }
    .await;
    Ok(match outcome {
        Ok(client) => json(StatusCode::OK, &client),
        Err(err) => error_response(&err),
    })
}

/// `DELETE /clients/{id}` → 200 + the client with `revoked_at` set.
pub async fn revoke_client(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        caller(app, &request, Needs::Admin).await?;
        let id = client_id(&request)?;
        app.clients.revoke(id, deadline(&request).into()).await
    }
    .await;
    Ok(match outcome {
        Ok(client) => json(StatusCode::OK, &client),
        Err(err) => error_response(&err),
    })
}

fn client_id(request: &Request) -> Result<ClientId, Error> {
    path_id(request, &["clients", "{id}"])
        .and_then(ClientId::parse)
        .ok_or(Error::NotFound("client"))
}

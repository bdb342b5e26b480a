//! `POST /clients`, `GET /clients`, `DELETE /clients/{id}`: admins only.

use super::{HandlerResult, caller, deadline, error_response, json, json_body, path_id};
use crate::App;
use crate::clients::{ClientId, Needs, NewClient};
use crate::error::Error;
use lambda_http::Request;
use lambda_http::http::StatusCode;

/// `POST /clients` → 201 + the client, with its key (shown only here).
pub async fn create_client(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        caller(app, &request, Needs::Admin).await?;
        let new = NewClient::from_json(&json_body(&request)?)?;
        app.clients.create(&new, deadline(&request).into()).await
    }
    .await;
    Ok(match outcome {
        Ok(client) => json(StatusCode::CREATED, &client),
        Err(err) => error_response(&err),
    })
}

/// `GET /clients` → 200 + every client, oldest first, without keys.
pub async fn list_clients(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        caller(app, &request, Needs::Admin).await?;
        app.clients.list(deadline(&request).into()).await
    }
    .await;
    Ok(match outcome {
        Ok(clients) => json(StatusCode::OK, &clients),
        Err(err) => error_response(&err),
    })
}

/// `DELETE /clients/{id}` → 200 + the client with `revoked_at` set.
pub async fn revoke_client(app: &App, request: Request) -> HandlerResult {
    let outcome = async {
        caller(app, &request, Needs::Admin).await?;
        let id = path_id(&request, &["clients", "{id}"])
            .and_then(ClientId::parse)
            .ok_or(Error::NotFound("client"))?;
        app.clients.revoke(id, deadline(&request).into()).await
    }
    .await;
    Ok(match outcome {
        Ok(client) => json(StatusCode::OK, &client),
        Err(err) => error_response(&err),
    })
}

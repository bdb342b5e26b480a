//! Lambda function: `shared::http::move_hold`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("POST /holds/{id}/move", |app, request| {
        Box::pin(shared::http::move_hold(app, request))
    })
    .await
}

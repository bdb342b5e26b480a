//! Lambda function: `shared::http::extend_hold`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("POST /holds/{id}/extend", |app, request| {
        Box::pin(shared::http::extend_hold(app, request))
    })
    .await
}

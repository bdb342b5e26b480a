//! Lambda function: `shared::http::find_hold`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("GET /holds", |app, request| {
        Box::pin(shared::http::find_hold(app, request))
    })
    .await
}

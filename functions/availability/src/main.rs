//! Lambda function: `shared::http::availability`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("GET /slots/availability", |app, request| {
        Box::pin(shared::http::availability(app, request))
    })
    .await
}

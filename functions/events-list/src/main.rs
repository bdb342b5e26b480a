//! Lambda function: `shared::http::list_events`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("GET /events", |app, request| {
        Box::pin(shared::http::list_events(app, request))
    })
    .await
}

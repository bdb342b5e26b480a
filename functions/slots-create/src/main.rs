//! Lambda function: `shared::http::create_slots`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("POST /slots", |app, request| {
        Box::pin(shared::http::create_slots(app, request))
    })
    .await
}

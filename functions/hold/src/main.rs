//! Lambda function: `shared::http::hold`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("POST /slots/{id}/hold", |app, request| {
        Box::pin(shared::http::hold(app, request))
    })
    .await
}

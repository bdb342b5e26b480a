//! Lambda function: `shared::http::cancel`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("DELETE /holds/{id}", |app, request| {
        Box::pin(shared::http::cancel(app, request))
    })
    .await
}

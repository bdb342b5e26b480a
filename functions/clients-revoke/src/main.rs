//! Lambda function: `shared::http::revoke_client`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("DELETE /clients/{id}", |app, request| {
        Box::pin(shared::http::revoke_client(app, request))
    })
    .await
}

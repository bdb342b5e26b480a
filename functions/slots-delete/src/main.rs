//! Lambda function: `shared::http::delete_slot`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("DELETE /slots/{id}", |app, request| {
        Box::pin(shared::http::delete_slot(app, request))
    })
    .await
}

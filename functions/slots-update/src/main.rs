//! Lambda function: `shared::http::update_slot`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("PATCH /slots/{id}", |app, request| {
        Box::pin(shared::http::update_slot(app, request))
    })
    .await
}

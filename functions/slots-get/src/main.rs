//! Lambda function: `shared::http::get_slot`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("GET /slots/{id}", |app, request| {
        Box::pin(shared::http::get_slot(app, request))
    })
    .await
}

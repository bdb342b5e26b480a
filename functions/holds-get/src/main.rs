//! Lambda function: `shared::http::get_hold`.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve("GET /holds/{id}", |app, request| {
        Box::pin(shared::http::get_hold(app, request))
    })
    .await
}

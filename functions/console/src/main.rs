//! Lambda function: `shared::http::console_page` (GET /console). No database, no cache,
//! no key: static files compiled into the binary.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve_without_app("GET /console", |request| {
        Box::pin(shared::http::console_page(request))
    })
    .await
}

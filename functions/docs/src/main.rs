//! Lambda function: `shared::http::docs_page` (GET /docs). No database, no cache,
//! no key: static files compiled into the binary.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve_without_app("GET /docs", |request| {
        Box::pin(shared::http::docs_page(request))
    })
    .await
}

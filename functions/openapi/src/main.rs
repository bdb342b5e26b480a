//! Lambda function: `shared::http::openapi_document` (GET /openapi.yaml). No database, no cache,
//! no key: static files compiled into the binary.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve_without_app("GET /openapi.yaml", |request| {
        Box::pin(shared::http::openapi_document(request))
    })
    .await
}

//! Lambda function: the `$default` route, `shared::http::not_found` (404
//! for an unknown path, 405 with `Allow` for a known path's other methods).
//! No database or cache: it only answers.

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::serve_without_app("$default", |request| {
        Box::pin(shared::http::not_found(request))
    })
    .await
}

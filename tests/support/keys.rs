//! Clients and keys for the tests of SPEC §8: environments in `api-key`
//! mode, clients made with the service's own installer, and requests that
//! carry a key.

use super::{TestDb, redis_url};
use lambda_http::Request;
use lambda_http::http::{HeaderValue, Method, header};
use serde_json::Value;
use shared::App;
use shared::cache::{AvailabilityCache, CacheSettings};
use shared::clients::install::install_key;
use shared::clients::{ApiKey, ClientId, Role};
use shared::config::{Access, AuthMode, HoldRules};
use std::time::Duration;

/// A client the test made, with its key.
#[derive(Clone)]
pub struct TestClient {
    pub id: ClientId,
    pub key: String,
}

impl TestClient {
    pub fn bearer(&self) -> String {
        format!("Bearer {}", self.key)
    }

    /// `request` with this client's key.
    pub fn by(&self, request: Request) -> Request {
        authorized(request, Some(&self.bearer()))
    }
}

impl TestDb {
    /// A client named `name` with a fresh key (and a rate limit of its own
    /// when given: a NULL `rate_limit_per_second` otherwise).
    pub async fn client(&self, name: &str, role: Role, rate: Option<u32>) -> TestClient {
        let key = ApiKey::generate().expect("randomness");
        let id = install_key(&self.admin, name, role, &key)
            .await
            .expect("install key");
        sqlx::query("UPDATE api_clients SET rate_limit_per_second = ? WHERE id = ?")
            .bind(rate)
            .bind(id.0)
            .execute(&self.admin)
            .await
            .expect("rate limit");
        TestClient {
            id,
            key: key.expose().to_string(),
        }
    }

    /// One environment in `mode`, the default rate `rate` (0: unlimited),
    /// no cache.
    pub fn app_in(&self, mode: AuthMode, rate: u32) -> App {
        App::new(shared::Config {
            access: Access {
                mode,
                rate_limit_per_second: rate,
                ..Access::default()
            },
            ..self.config(Duration::from_secs(300))
        })
        .expect("app")
    }

    /// One environment in `mode` (unlimited rate, no cache) with holds of
    /// `hold_ttl` under these rules (quantity, lifetime, retention).
    pub fn app_with_rules(&self, mode: AuthMode, hold_ttl: Duration, rules: HoldRules) -> App {
        App::new(shared::Config {
            access: Access {
                mode,
                rate_limit_per_second: 0,
                ..Access::default()
            },
            holds: rules,
            ..self.config(hold_ttl)
        })
        .expect("app")
    }

    /// One `api-key` environment with the cache on at `redis` (which may be
    /// a dead address), default rate `rate`.
    pub fn keyed_cached_app(&self, redis: &str, rate: u32) -> App {
        let config = shared::Config {
            redis_url: Some(redis.to_string()),
            access: Access {
                mode: AuthMode::ApiKey,
                rate_limit_per_second: rate,
                ..Access::default()
            },
            ..self.config(Duration::from_secs(300))
        };
        let pool = shared::db::connect_lazy(&self.url, 1).expect("pool");
        let cache = AvailabilityCache::new(redis, &self.name, CacheSettings::new(config.cache_ttl))
            .expect("cache client");
        let booking = shared::Booking::new(pool, config.hold_ttl, Some(cache));
        App::assemble(config, booking)
    }

    /// [`TestDb::keyed_cached_app`] on the tests' Redis.
    pub fn keyed_app_with_cache(&self, rate: u32) -> App {
        self.keyed_cached_app(&redis_url(), rate)
    }
}

/// The request with this `Authorization` header value (`None`: none).
pub fn authorized(mut request: Request, authorization: Option<&str>) -> Request {
    let headers = request.headers_mut();
    headers.remove(header::AUTHORIZATION);
    if let Some(value) = authorization {
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(value).expect("header value"),
        );
    }
    request
}

/// A request to the client routes: `method` on `path`, with `id` as the
/// path parameter and `body` as JSON text.
pub fn clients_request(
    method: Method,
    path: &str,
    id: Option<&str>,
    body: Option<&Value>,
) -> Request {
    let mut event = super::event_json("apigw_v2_availability.json", path, id, &[]);
    event["requestContext"]["http"]["method"] = method.as_str().into();
    event["routeKey"] = format!("{method} {path}").into();
    if let Some(body) = body {
        event["body"] = body.to_string().into();
        event["isBase64Encoded"] = false.into();
    }
    lambda_http::request::from_str(&event.to_string()).expect("valid API Gateway v2 event")
}

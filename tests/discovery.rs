//! The AWS look-ups of a cold start, against local stand-ins of the APIs:
//! cache discovery by name (`CACHE_NAME`) and the database secret
//! (`DB_SECRET_ARN`, RDS Proxy mode).
//!
//! Two stand-ins:
//! - **recorded responses**, served by a tiny HTTP server in this file:
//!   moto (below) does not implement DescribeServerlessCaches, the call the
//!   template's serverless cache needs, so its answers are written here from
//!   the API's documented shape (ElastiCache is an AWS query-protocol API:
//!   form-encoded `Action=…` requests, XML responses; Secrets Manager is
//!   JSON 1.1). The SDK's own generated parsers read them.
//! - **moto**, the AWS mock server from PyPI (`scripts/moto-server.sh`
//!   installs it into `.venv-tools` and starts it), for the replication-group
//!   fallback: the test creates replication groups through the API and
//!   discovers them by name.
//!
//! The last test runs a real cold start (`App::from_env`) in a child process
//! whose environment is the template's, with `AWS_ENDPOINT_URL` pointing
//! the SDK at the recorded stand-in.

use shared::aws::discover_cache;
use shared::config::{CacheSource, CacheUser, DatabaseSource, ProxyDatabase, Settings};
use slot_booking_tests::moto::{Moto, sdk};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const SERVERLESS_ENDPOINT: &str = "sb-cache-x1y2z3.serverless.use1.cache.amazonaws.com";
const SECRET_ARN: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:sb-db-AbCdEf";
const BROKEN_SECRET_ARN: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:broken";
const PASSWORD: &str = "Pw0rdFromSecretsManager9x";
const CACHE_SECRET_ARN: &str =
    "arn:aws:secretsmanager:us-east-1:123456789012:secret:sb-cache-GhIjKl";
const CACHE_PASSWORD: &str = "CachePw0rdFromSecretsManager7q";

// ---------------------------------------------------------------------------
// The recorded stand-in.
// ---------------------------------------------------------------------------

/// One request as the stand-in saw it.
#[derive(Debug, Clone)]
struct Seen {
    /// `Action` (ElastiCache) or `X-Amz-Target` (Secrets Manager).
    operation: String,
    params: HashMap<String, String>,
    authorization: String,
}

struct StandIn {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StandIn {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, log.clone()));
            }
        });
        Self { url, seen, task }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn operations(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.operation).collect()
    }
}

/// HTTP/1.1 with keep-alive, enough for the SDK's client.
async fn serve(stream: TcpStream, log: Arc<Mutex<Vec<Seen>>>) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    loop {
        let mut headers = HashMap::new();
        let mut line = String::new();
        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).await.unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
            }
        }
        let length: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).await.is_err() {
            return;
        }
        let body = String::from_utf8_lossy(&body).into_owned();
        let (seen, status, content_type, reply) = answer(&headers, &body);
        log.lock().unwrap().push(seen);
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
             x-amzn-requestid: 8f1e6c2a-0d7b-4c3e-9a51-5b2f0e4d7c11\r\n\r\n{reply}",
            reply.len()
        );
        if write.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn form_decode(body: &str) -> HashMap<String, String> {
    let decode = |text: &str| {
        let bytes = text.replace('+', " ").into_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                if let Ok(byte) = u8::from_str_radix(hex, 16) {
                    out.push(byte);
                    i += 3;
                    continue;
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    body.split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

/// The recorded answers: (what was asked, status line, content type, body).
fn answer(
    headers: &HashMap<String, String>,
    body: &str,
) -> (Seen, &'static str, &'static str, String) {
    let authorization = headers.get("authorization").cloned().unwrap_or_default();
    if let Some(target) = headers.get("x-amz-target") {
        let params: HashMap<String, String> = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string()))
            .collect();
        let seen = Seen {
            operation: target.clone(),
            params: params.clone(),
            authorization,
        };
        let json = "application/x-amz-json-1.1";
        let secret_id = params.get("SecretId").map(String::as_str);
        return match (target.as_str(), secret_id) {
            ("secretsmanager.GetSecretValue", Some(SECRET_ARN)) => {
                (seen, "200 OK", json, get_secret_value(SECRET_ARN, &secret_string()))
            }
            // The template's cache secret: a generation marker and the password.
            ("secretsmanager.GetSecretValue", Some(CACHE_SECRET_ARN)) => (
                seen,
                "200 OK",
                json,
                get_secret_value(
                    CACHE_SECRET_ARN,
                    &serde_json::json!({"generation": "1", "password": CACHE_PASSWORD})
                        .to_string(),
                ),
            ),
            ("secretsmanager.GetSecretValue", Some(BROKEN_SECRET_ARN)) => (
                seen,
                "200 OK",
                json,
                // Not JSON, and it contains what looks like a password.
                get_secret_value(BROKEN_SECRET_ARN, "password=s3cret-broken"),
            ),
            _ => (
                seen,
                "400 Bad Request",
                json,
                r#"{"__type":"ResourceNotFoundException","message":"Secrets Manager can't find the specified secret."}"#
                    .into(),
            ),
        };
    }
    let params = form_decode(body);
    let action = params.get("Action").cloned().unwrap_or_default();
    let seen = Seen {
        operation: action.clone(),
        params: params.clone(),
        authorization,
    };
    let xml = "text/xml";
    match action.as_str() {
        "DescribeServerlessCaches" => match params.get("ServerlessCacheName").map(String::as_str) {
            Some("sb-cache") => (
                seen,
                "200 OK",
                xml,
                serverless_caches("sb-cache", "available", true),
            ),
            Some("sb-creating") => (
                seen,
                "200 OK",
                xml,
                serverless_caches("sb-creating", "creating", false),
            ),
            Some(name) => (
                seen,
                "404 Not Found",
                xml,
                error_xml(
                    "ServerlessCacheNotFoundFault",
                    &format!("Serverless cache {name} not found."),
                ),
            ),
            None => (
                seen,
                "400 Bad Request",
                xml,
                error_xml("InvalidParameterValue", "name"),
            ),
        },
        "DescribeReplicationGroups" => match params.get("ReplicationGroupId").map(String::as_str) {
            Some("rg-cluster") => (seen, "200 OK", xml, REPLICATION_GROUP_CLUSTER.into()),
            Some("rg-plain") => (seen, "200 OK", xml, REPLICATION_GROUP_PLAIN.into()),
            Some(id) => (
                seen,
                "404 Not Found",
                xml,
                error_xml(
                    "ReplicationGroupNotFoundFault",
                    &format!("Replication group {id} not found."),
                ),
            ),
            None => (
                seen,
                "400 Bad Request",
                xml,
                error_xml("InvalidParameterValue", "id"),
            ),
        },
        _ => (
            seen,
            "400 Bad Request",
            xml,
            error_xml("InvalidAction", "unknown action"),
        ),
    }
}

fn secret_string() -> String {
    // The template's generated secret: username/password plus what RDS adds.
    serde_json::json!({
        "username": "slotadmin",
        "password": PASSWORD,
        "engine": "mysql",
        "host": "sb-cluster.cluster-abc.us-east-1.rds.amazonaws.com",
        "port": 3306,
        "dbClusterIdentifier": "sb-cluster"
    })
    .to_string()
}

fn get_secret_value(arn: &str, secret_string: &str) -> String {
    serde_json::json!({
        "ARN": arn,
        "Name": "sb-db",
        "VersionId": "a1b2c3d4-5678-90ab-cdef-EXAMPLE11111",
        "SecretString": secret_string,
        "VersionStages": ["AWSCURRENT"],
        "CreatedDate": 1_780_000_000.0
    })
    .to_string()
}

fn error_xml(code: &str, message: &str) -> String {
    format!(
        r#"<ErrorResponse xmlns="http://elasticache.amazonaws.com/doc/2015-02-02/">
  <Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>
  <RequestId>8f1e6c2a-0d7b-4c3e-9a51-5b2f0e4d7c11</RequestId>
</ErrorResponse>"#
    )
}

/// DescribeServerlessCaches, as documented (ServerlessCaches is a list of
/// `member`); `with_endpoint` false = a cache still being created.
fn serverless_caches(name: &str, status: &str, with_endpoint: bool) -> String {
    let endpoints = if with_endpoint {
        format!(
            "<Endpoint><Address>{SERVERLESS_ENDPOINT}</Address><Port>6379</Port></Endpoint>\
             <ReaderEndpoint><Address>{SERVERLESS_ENDPOINT}</Address><Port>6380</Port></ReaderEndpoint>"
        )
    } else {
        String::new()
    };
    format!(
        r#"<DescribeServerlessCachesResponse xmlns="http://elasticache.amazonaws.com/doc/2015-02-02/">
  <DescribeServerlessCachesResult>
    <ServerlessCaches>
      <member>
        <ServerlessCacheName>{name}</ServerlessCacheName>
        <Description>slot-booking availability cache (sb)</Description>
        <CreateTime>2026-11-30T10:00:00.000Z</CreateTime>
        <Status>{status}</Status>
        <Engine>valkey</Engine>
        <MajorEngineVersion>8</MajorEngineVersion>
        <FullEngineVersion>8.0</FullEngineVersion>
        <CacheUsageLimits>
          <DataStorage><Maximum>1</Maximum><Unit>GB</Unit></DataStorage>
          <ECPUPerSecond><Maximum>5000</Maximum></ECPUPerSecond>
        </CacheUsageLimits>
        <SecurityGroupIds><SecurityGroupId>sg-0123456789abcdef0</SecurityGroupId></SecurityGroupIds>
        {endpoints}
        <ARN>arn:aws:elasticache:us-east-1:123456789012:serverlesscache:{name}</ARN>
        <SubnetIds><SubnetId>subnet-0aaa1111</SubnetId><SubnetId>subnet-0bbb2222</SubnetId></SubnetIds>
        <SnapshotRetentionLimit>0</SnapshotRetentionLimit>
        <DailySnapshotTime>04:00</DailySnapshotTime>
      </member>
    </ServerlessCaches>
  </DescribeServerlessCachesResult>
  <ResponseMetadata><RequestId>8f1e6c2a-0d7b-4c3e-9a51-5b2f0e4d7c11</RequestId></ResponseMetadata>
</DescribeServerlessCachesResponse>"#
    )
}

/// A cluster-mode replication group: a configuration endpoint, TLS on.
const REPLICATION_GROUP_CLUSTER: &str = r#"<DescribeReplicationGroupsResponse xmlns="http://elasticache.amazonaws.com/doc/2015-02-02/">
  <DescribeReplicationGroupsResult>
    <ReplicationGroups>
      <ReplicationGroup>
        <ReplicationGroupId>rg-cluster</ReplicationGroupId>
        <Description>clustered</Description>
        <Status>available</Status>
        <MemberClusters><ClusterId>rg-cluster-0001-001</ClusterId><ClusterId>rg-cluster-0002-001</ClusterId></MemberClusters>
        <NodeGroups>
          <NodeGroup><NodeGroupId>0001</NodeGroupId><Status>available</Status><Slots>0-8191</Slots>
            <NodeGroupMembers><NodeGroupMember><CacheClusterId>rg-cluster-0001-001</CacheClusterId><CacheNodeId>0001</CacheNodeId><PreferredAvailabilityZone>us-east-1a</PreferredAvailabilityZone></NodeGroupMember></NodeGroupMembers>
          </NodeGroup>
          <NodeGroup><NodeGroupId>0002</NodeGroupId><Status>available</Status><Slots>8192-16383</Slots>
            <NodeGroupMembers><NodeGroupMember><CacheClusterId>rg-cluster-0002-001</CacheClusterId><CacheNodeId>0001</CacheNodeId><PreferredAvailabilityZone>us-east-1b</PreferredAvailabilityZone></NodeGroupMember></NodeGroupMembers>
          </NodeGroup>
        </NodeGroups>
        <AutomaticFailover>enabled</AutomaticFailover>
        <MultiAZ>enabled</MultiAZ>
        <ConfigurationEndpoint><Address>clustercfg.rg-cluster.abc123.use1.cache.amazonaws.com</Address><Port>6379</Port></ConfigurationEndpoint>
        <SnapshotRetentionLimit>0</SnapshotRetentionLimit>
        <ClusterEnabled>true</ClusterEnabled>
        <CacheNodeType>cache.t4g.small</CacheNodeType>
        <AuthTokenEnabled>false</AuthTokenEnabled>
        <TransitEncryptionEnabled>true</TransitEncryptionEnabled>
        <AtRestEncryptionEnabled>true</AtRestEncryptionEnabled>
        <ARN>arn:aws:elasticache:us-east-1:123456789012:replicationgroup:rg-cluster</ARN>
        <ClusterMode>enabled</ClusterMode>
        <Engine>valkey</Engine>
      </ReplicationGroup>
    </ReplicationGroups>
  </DescribeReplicationGroupsResult>
  <ResponseMetadata><RequestId>8f1e6c2a-0d7b-4c3e-9a51-5b2f0e4d7c11</RequestId></ResponseMetadata>
</DescribeReplicationGroupsResponse>"#;

/// A non-clustered replication group: the primary endpoint, TLS off.
const REPLICATION_GROUP_PLAIN: &str = r#"<DescribeReplicationGroupsResponse xmlns="http://elasticache.amazonaws.com/doc/2015-02-02/">
  <DescribeReplicationGroupsResult>
    <ReplicationGroups>
      <ReplicationGroup>
        <ReplicationGroupId>rg-plain</ReplicationGroupId>
        <Description>single shard</Description>
        <Status>available</Status>
        <MemberClusters><ClusterId>rg-plain-001</ClusterId></MemberClusters>
        <NodeGroups>
          <NodeGroup><NodeGroupId>0001</NodeGroupId><Status>available</Status>
            <PrimaryEndpoint><Address>master.rg-plain.abc123.use1.cache.amazonaws.com</Address><Port>6379</Port></PrimaryEndpoint>
            <ReaderEndpoint><Address>replica.rg-plain.abc123.use1.cache.amazonaws.com</Address><Port>6379</Port></ReaderEndpoint>
          </NodeGroup>
        </NodeGroups>
        <AutomaticFailover>disabled</AutomaticFailover>
        <ClusterEnabled>false</ClusterEnabled>
        <TransitEncryptionEnabled>false</TransitEncryptionEnabled>
        <ARN>arn:aws:elasticache:us-east-1:123456789012:replicationgroup:rg-plain</ARN>
        <ClusterMode>disabled</ClusterMode>
        <Engine>redis</Engine>
      </ReplicationGroup>
    </ReplicationGroups>
  </DescribeReplicationGroupsResult>
  <ResponseMetadata><RequestId>8f1e6c2a-0d7b-4c3e-9a51-5b2f0e4d7c11</RequestId></ResponseMetadata>
</DescribeReplicationGroupsResponse>"#;

fn settings(database: DatabaseSource, cache: CacheSource) -> Settings {
    Settings {
        database,
        cache,
        cache_ttl: Duration::from_secs(10),
        hold_ttl: Duration::from_secs(300),
        holds: shared::config::HoldRules::default(),
        access: Default::default(),
        cache_namespace: "slot_booking".into(),
        cache_user: None,
        webhooks: Default::default(),
    }
}

fn local_database() -> DatabaseSource {
    DatabaseSource::Url("mysql://root@127.0.0.1:3306/slot_booking".into())
}

// ---------------------------------------------------------------------------
// Discovery against the recorded stand-in.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_serverless_cache_is_found_by_name() {
    let stand_in = StandIn::start().await;
    let url = discover_cache(&sdk(&stand_in.url).await, "sb-cache")
        .await
        .expect("discovered");
    // Serverless caches are TLS-only.
    assert_eq!(url, format!("rediss://{SERVERLESS_ENDPOINT}:6379"));
    // One signed call, for that name; no fallback.
    let seen = stand_in.seen();
    assert_eq!(stand_in.operations(), ["DescribeServerlessCaches"]);
    assert_eq!(seen[0].params["ServerlessCacheName"], "sb-cache");
    assert_eq!(seen[0].params["Version"], "2015-02-02");
    assert!(
        seen[0].authorization.starts_with("AWS4-HMAC-SHA256 ")
            && seen[0]
                .authorization
                .contains("/us-east-1/elasticache/aws4_request"),
        "{}",
        seen[0].authorization
    );
}

#[tokio::test]
async fn a_replication_group_is_the_fallback_but_never_in_plaintext() {
    let stand_in = StandIn::start().await;
    let sdk = sdk(&stand_in.url).await;
    // Cluster mode: the configuration endpoint; TLS on: rediss.
    assert_eq!(
        discover_cache(&sdk, "rg-cluster").await.expect("cluster"),
        "rediss://clustercfg.rg-cluster.abc123.use1.cache.amazonaws.com:6379"
    );
    // TLS off: refused, not redis://.
    let err = discover_cache(&sdk, "rg-plain")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("in-transit encryption off") && err.contains("rg-plain"),
        "{err}"
    );
    assert!(!err.contains("master.rg-plain"), "no URL handed out: {err}");
    assert_eq!(
        stand_in.operations(),
        [
            "DescribeServerlessCaches",
            "DescribeReplicationGroups",
            "DescribeServerlessCaches",
            "DescribeReplicationGroups"
        ]
    );
    assert_eq!(stand_in.seen()[3].params["ReplicationGroupId"], "rg-plain");
}

#[tokio::test]
async fn a_cache_that_does_not_exist_leaves_the_cache_off() {
    let stand_in = StandIn::start().await;
    let sdk = sdk(&stand_in.url).await;
    let err = discover_cache(&sdk, "no-such-cache").await.unwrap_err();
    let line = err.to_string();
    assert!(line.contains("ServerlessCacheNotFoundFault"), "{line}");
    assert!(line.contains("ReplicationGroupNotFoundFault"), "{line}");
    assert!(!line.contains('\n'), "one line: {line}");

    // At cold start this is a warning, not a failure: the app starts with
    // the cache off.
    let resolved = settings(
        local_database(),
        CacheSource::Discover("no-such-cache".into()),
    )
    .resolve_with(&sdk)
    .await
    .expect("a missing cache does not stop the function");
    assert_eq!(resolved.config.redis_url, None);
    let app = shared::App::new(resolved.config).expect("app without cache");
    assert_eq!(app.config.redis_url, None);
}

#[tokio::test]
async fn a_cache_still_being_created_has_no_endpoint_yet() {
    let stand_in = StandIn::start().await;
    let err = discover_cache(&sdk(&stand_in.url).await, "sb-creating")
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("no endpoint yet (status creating)"),
        "{err}"
    );
    assert_eq!(stand_in.operations(), ["DescribeServerlessCaches"]);
}

#[tokio::test]
async fn an_unreachable_elasticache_api_is_not_fatal() {
    // A port nobody listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let sdk = sdk(&format!("http://{closed}")).await;
    let started = Instant::now();
    let resolved = settings(local_database(), CacheSource::Discover("sb-cache".into()))
        .resolve_with(&sdk)
        .await
        .expect("no cache, no crash");
    assert_eq!(resolved.config.redis_url, None);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    // Nobody answered: no second call to wait on.
    let err = discover_cache(&sdk, "sb-cache").await.unwrap_err();
    assert!(
        !err.to_string().contains("DescribeReplicationGroups"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------
// RDS Proxy mode: the secret.
// ---------------------------------------------------------------------------

fn proxy(secret_arn: &str) -> DatabaseSource {
    DatabaseSource::Proxy(ProxyDatabase {
        host: "sb.proxy-abc.us-east-1.rds.amazonaws.com".into(),
        port: 3306,
        name: "slot_booking".into(),
        user: "slotadmin".into(),
        secret_arn: secret_arn.into(),
    })
}

#[tokio::test]
async fn rds_proxy_mode_reads_the_password_from_the_secret_and_verifies_tls() {
    let stand_in = StandIn::start().await;
    let sdk = sdk(&stand_in.url).await;
    let resolved = settings(proxy(SECRET_ARN), CacheSource::Discover("sb-cache".into()))
        .resolve_with(&sdk)
        .await
        .expect("resolved");
    assert_eq!(
        resolved.config.database_url,
        "mysql://slotadmin@sb.proxy-abc.us-east-1.rds.amazonaws.com:3306/slot_booking\
         ?ssl-mode=VERIFY_IDENTITY"
    );
    assert_eq!(
        resolved.database_password.as_ref().map(|p| p.expose()),
        Some(PASSWORD)
    );
    assert_eq!(
        resolved.config.redis_url.as_deref(),
        Some(format!("rediss://{SERVERLESS_ENDPOINT}:6379").as_str())
    );
    // Nothing printable carries the password.
    assert!(!format!("{resolved:?}").contains(PASSWORD));
    // The connection options: password added, full TLS verification.
    let options = shared::db::options_with_password(
        &resolved.config.database_url,
        resolved.database_password.as_ref(),
    )
    .expect("options");
    assert!(matches!(
        options.get_ssl_mode(),
        sqlx::mysql::MySqlSslMode::VerifyIdentity
    ));
    assert_eq!(options.get_username(), "slotadmin");
    assert_eq!(options.get_database(), Some("slot_booking"));
    // The secret was asked for by its ARN, with a signed request.
    let secret_call = stand_in
        .seen()
        .into_iter()
        .find(|s| s.operation == "secretsmanager.GetSecretValue")
        .expect("GetSecretValue");
    assert_eq!(secret_call.params["SecretId"], SECRET_ARN);
    assert!(
        secret_call
            .authorization
            .contains("/secretsmanager/aws4_request")
    );
    // The app builds on it (lazily: no connection now).
    let app = shared::App::with_password(resolved.config, resolved.database_password.as_ref())
        .expect("app");
    assert_eq!(app.config.database_name(), "slot_booking");
}

#[tokio::test]
async fn an_unreadable_secret_stops_the_start_without_showing_it() {
    let stand_in = StandIn::start().await;
    let sdk = sdk(&stand_in.url).await;
    let err = settings(proxy(BROKEN_SECRET_ARN), CacheSource::Off)
        .resolve_with(&sdk)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(BROKEN_SECRET_ARN) && err.contains("not valid JSON"),
        "{err}"
    );
    assert!(!err.contains("s3cret-broken"), "{err}");

    let err = settings(
        proxy("arn:aws:secretsmanager:us-east-1:1:secret:gone"),
        CacheSource::Off,
    )
    .resolve_with(&sdk)
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("ResourceNotFoundException"), "{err}");
}

#[tokio::test]
async fn the_cache_users_password_is_read_from_its_secret() {
    let stand_in = StandIn::start().await;
    let sdk = sdk(&stand_in.url).await;
    let resolved = Settings {
        cache_user: Some(CacheUser {
            name: "sb-app-1".into(),
            secret_arn: CACHE_SECRET_ARN.into(),
        }),
        ..settings(local_database(), CacheSource::Discover("sb-cache".into()))
    }
    .resolve_with(&sdk)
    .await
    .expect("resolved");
    assert_eq!(
        resolved.config.redis_url.as_deref(),
        Some(format!("rediss://{SERVERLESS_ENDPOINT}:6379").as_str())
    );
    assert_eq!(resolved.config.cache_user.as_deref(), Some("sb-app-1"));
    assert_eq!(
        resolved.cache_password.as_ref().map(|p| p.expose()),
        Some(CACHE_PASSWORD)
    );
    assert!(!format!("{resolved:?}").contains(CACHE_PASSWORD));
    let call = stand_in
        .seen()
        .into_iter()
        .find(|s| s.operation == "secretsmanager.GetSecretValue")
        .expect("GetSecretValue");
    assert_eq!(call.params["SecretId"], CACHE_SECRET_ARN);
    // The app builds its cache client as that user (lazily: no connection).
    let app = shared::App::with_passwords(resolved.config, None, resolved.cache_password.as_ref())
        .expect("app");
    assert!(app.booking.cache().is_some());
}

#[tokio::test]
async fn an_unreadable_cache_secret_leaves_the_cache_off() {
    let stand_in = StandIn::start().await;
    let sdk = sdk(&stand_in.url).await;
    let resolved = Settings {
        cache_user: Some(CacheUser {
            name: "sb-app-1".into(),
            secret_arn: "arn:aws:secretsmanager:us-east-1:1:secret:gone".into(),
        }),
        ..settings(
            local_database(),
            CacheSource::Url(format!("rediss://{SERVERLESS_ENDPOINT}:6379")),
        )
    }
    .resolve_with(&sdk)
    .await
    .expect("a cache without its password does not stop the function");
    assert_eq!(resolved.config.redis_url, None);
    assert_eq!(resolved.config.cache_user, None);
    assert!(resolved.cache_password.is_none());
    let app = shared::App::new(resolved.config).expect("app without cache");
    assert!(app.booking.cache().is_none());
}

// ---------------------------------------------------------------------------
// Discovery against moto.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moto_replication_groups_are_discovered_by_name() {
    let moto = Moto::start().await;
    let sdk = sdk(&moto.url).await;
    let client = aws_sdk_elasticache::Client::new(&sdk);

    // moto has no serverless caches: the serverless look-up gets an error
    // answer (moto 5.2.5 answers 500), and discovery falls back.
    let created = client
        .create_replication_group()
        .replication_group_id("sb-rg-tls")
        .replication_group_description("slot-booking test")
        .engine("valkey")
        .cache_node_type("cache.t4g.micro")
        .transit_encryption_enabled(true)
        .send()
        .await
        .expect("CreateReplicationGroup (TLS)");
    let primary = created
        .replication_group()
        .and_then(|g| g.node_groups().first())
        .and_then(|n| n.primary_endpoint())
        .expect("primary endpoint");
    let expected = format!(
        "rediss://{}:{}",
        primary.address().unwrap(),
        primary.port().unwrap()
    );
    assert!(
        expected.starts_with("rediss://master.sb-rg-tls."),
        "{expected}"
    );
    assert_eq!(
        discover_cache(&sdk, "sb-rg-tls").await.expect("tls"),
        expected
    );

    let created = client
        .create_replication_group()
        .replication_group_id("sb-rg-cluster")
        .replication_group_description("slot-booking test, cluster mode")
        .engine("valkey")
        .cache_node_type("cache.t4g.micro")
        .cluster_mode(aws_sdk_elasticache::types::ClusterMode::Enabled)
        .num_node_groups(2)
        .send()
        .await
        .expect("CreateReplicationGroup (cluster)");
    let configuration = created
        .replication_group()
        .and_then(|g| g.configuration_endpoint())
        .expect("configuration endpoint");
    assert!(
        configuration
            .address()
            .unwrap()
            .starts_with("clustercfg.sb-rg-cluster."),
        "{configuration:?}"
    );
    // Created without in-transit encryption: never handed out as redis://.
    let err = discover_cache(&sdk, "sb-rg-cluster").await.unwrap_err();
    assert!(
        err.to_string().contains("in-transit encryption off"),
        "{err}"
    );

    let err = discover_cache(&sdk, "sb-rg-missing").await.unwrap_err();
    assert!(
        err.to_string().contains("ReplicationGroupNotFoundFault"),
        "{err}"
    );

    // The serverless look-up really was asked first, and moto really does
    // not implement it (the reason these tests also use recorded answers).
    assert!(
        moto.log()
            .contains("describe_serverless_caches action has not been implemented"),
        "{}",
        moto.log()
    );
}

// ---------------------------------------------------------------------------
// A real cold start, environment and all, in a child process.
// ---------------------------------------------------------------------------

/// Runs this test binary's `child_cold_start` with the template's
/// environment, `AWS_ENDPOINT_URL` aimed at the stand-in, and `cache_name`.
async fn cold_start(stand_in: &StandIn, cache_name: &str) -> (bool, String) {
    let home = std::env::temp_dir().join(format!("sb-discovery-home-{}", std::process::id()));
    std::fs::create_dir_all(&home).expect("empty HOME");
    let output = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_cold_start",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("DISCOVERY_CHILD", "1")
        // The template's Globals.
        .env("DB_HOST", "sb.proxy-abc.us-east-1.rds.amazonaws.com")
        .env("DB_PORT", "3306")
        .env("DB_NAME", "slot_booking")
        .env("DB_USER", "slotadmin")
        .env("DB_SECRET_ARN", SECRET_ARN)
        .env("DATABASE_URL", "")
        .env("REDIS_URL", "")
        .env("CACHE_NAME", cache_name)
        .env("CACHE_USER", "sb-app-1")
        .env("CACHE_SECRET_ARN", CACHE_SECRET_ARN)
        .env("CACHE_NAMESPACE", "sb-stack")
        .env("SLOT_AVAILABILITY_CACHE_TTL", "10")
        .env("HOLD_TTL_SECONDS", "300")
        .env("RUST_LOG", "info")
        // What Lambda gives, with the standard endpoint override.
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
        .env(
            "AWS_SECRET_ACCESS_KEY",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        )
        .env("AWS_SESSION_TOKEN", "session")
        .env("AWS_ENDPOINT_URL", &stand_in.url)
        .env("AWS_MAX_ATTEMPTS", "1")
        // No ~/.aws, as on Lambda.
        .env("HOME", &home)
        .env_remove("AWS_CONFIG_FILE")
        .env_remove("AWS_SHARED_CREDENTIALS_FILE")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_ENDPOINT_URL_ELASTICACHE")
        .env_remove("AWS_ENDPOINT_URL_SECRETS_MANAGER")
        .output()
        .await
        .expect("run the child");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_start_from_the_template_environment() {
    let stand_in = StandIn::start().await;

    let (ok, output) = cold_start(&stand_in, "sb-cache").await;
    assert!(ok, "{output}");
    assert!(output.contains("test result: ok. 1 passed"), "{output}");
    assert!(
        output.contains(
            "CHILD_CONFIG database_url=mysql://slotadmin@sb.proxy-abc.us-east-1.rds.amazonaws.com:3306/slot_booking?ssl-mode=VERIFY_IDENTITY"
        ),
        "{output}"
    );
    assert!(
        output.contains(&format!(
            "CHILD_CONFIG redis_url=Some(\"rediss://{SERVERLESS_ENDPOINT}:6379\")"
        )),
        "{output}"
    );
    assert!(
        output.contains("CHILD_CONFIG cache_user=Some(\"sb-app-1\")"),
        "{output}"
    );
    assert!(
        output.contains("CHILD_CONFIG cache_namespace=sb-stack:slot_booking"),
        "{output}"
    );
    assert!(output.contains("CHILD_PASSWORD matches"), "{output}");
    assert!(output.contains("CHILD_CACHE_PASSWORD matches"), "{output}");
    assert!(!output.contains(PASSWORD), "the password leaked: {output}");
    assert!(
        !output.contains(CACHE_PASSWORD),
        "the cache password leaked: {output}"
    );

    // A cache that cannot be found: a warning, and the function runs on.
    let (ok, output) = cold_start(&stand_in, "no-such-cache").await;
    assert!(ok, "{output}");
    assert!(output.contains("CHILD_CONFIG redis_url=None"), "{output}");
    let warning = output
        .lines()
        .find(|line| line.contains("running without the availability cache"))
        .unwrap_or_else(|| panic!("no warning: {output}"));
    assert!(warning.contains("\"level\":\"WARN\""), "{warning}");
    assert!(
        warning.contains("ServerlessCacheNotFoundFault"),
        "{warning}"
    );
    assert!(!output.contains(PASSWORD), "the password leaked: {output}");

    // Both children reached the stand-in through AWS_ENDPOINT_URL (each
    // reads both secrets twice: App::from_env, then its own check).
    let operations = stand_in.operations();
    let reads = |arn: &str| {
        stand_in
            .seen()
            .iter()
            .filter(|s| s.operation == "secretsmanager.GetSecretValue")
            .filter(|s| s.params.get("SecretId").map(String::as_str) == Some(arn))
            .count()
    };
    assert_eq!(reads(SECRET_ARN), 4, "{operations:?}");
    assert_eq!(reads(CACHE_SECRET_ARN), 4, "{operations:?}");
    assert!(
        operations.iter().any(|o| o == "DescribeReplicationGroups"),
        "{operations:?}"
    );
}

/// The child of [`a_cold_start_from_the_template_environment`]: does
/// nothing unless started by it (it needs that environment).
#[tokio::test]
#[ignore = "run by a_cold_start_from_the_template_environment with its environment"]
async fn child_cold_start() {
    if std::env::var("DISCOVERY_CHILD").as_deref() != Ok("1") {
        eprintln!("child_cold_start: only meaningful when started by its parent test");
        return;
    }
    shared::telemetry::init();
    let app = shared::App::from_env().await.expect("cold start");
    println!("CHILD_CONFIG database_url={}", app.config.database_url);
    println!("CHILD_CONFIG redis_url={:?}", app.config.redis_url);
    println!("CHILD_CONFIG cache_user={:?}", app.config.cache_user);
    println!(
        "CHILD_CONFIG cache_namespace={}",
        app.config.cache_namespace
    );
    // Check the password here, so the parent never needs to see it.
    let resolved = Settings::from_env()
        .expect("settings")
        .resolve()
        .await
        .expect("resolve");
    let password = resolved.database_password.expect("a password");
    assert_eq!(password.expose(), PASSWORD);
    println!("CHILD_PASSWORD matches");
    if app.config.redis_url.is_some() {
        let password = resolved.cache_password.expect("a cache password");
        assert_eq!(password.expose(), CACHE_PASSWORD);
        println!("CHILD_CACHE_PASSWORD matches");
    }
}

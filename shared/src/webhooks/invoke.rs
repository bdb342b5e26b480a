//! The sender on AWS (SPEC §20, "On AWS"): the worker in the VPC has no
//! route to the internet (no NAT gateway), so it hands each signed
//! request (`send::Outgoing`) to `functions/webhooks-send`, outside the
//! VPC, through the Lambda Invoke API (the VPC's Lambda interface
//! endpoint), and takes its `send::Answer` back.
//!
//! A plain HTTPS POST signed with SigV4 (aws-sigv4, the SDK's own signer,
//! already linked into every function through the Secrets Manager client)
//! over reqwest (already the sender's client) rather than aws-sdk-lambda:
//! one call needs no generated client, and `shared`, which every function
//! links, gains no crate.

use super::send::{Answer, Outgoing};
use aws_config::SdkConfig;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use std::time::{Duration, SystemTime};

/// The variable that names the sender function; unset, the worker sends
/// directly (`make dev`, the tests).
pub const SENDER_VARIABLE: &str = "WEBHOOK_SENDER_FUNCTION";

/// Beyond the request's own timeout: the invoke's round trip and a cold
/// start of the sender (a Rust cold start is ~100 ms), within the lease's
/// margin (`WEBHOOK_TIMEOUT_MS` + 5 s), so that an answer that comes back
/// is recorded under the lease it was claimed with.
const INVOKE_MARGIN: Duration = Duration::from_secs(4);

/// Invokes the sender function, one request per invocation.
#[derive(Clone, Debug)]
pub struct Invoke {
    client: reqwest::Client,
    /// `…/2015-03-31/functions/<name>/invocations`.
    url: String,
    region: String,
    credentials: SharedCredentialsProvider,
}

impl Invoke {
    /// `function` (a name) by the Lambda endpoint of the SDK's region:
    /// `AWS_ENDPOINT_URL_LAMBDA` or `AWS_ENDPOINT_URL` when set (the
    /// tests' stand-in), else `https://lambda.<region>.amazonaws.com`.
    pub fn new(sdk: &SdkConfig, function: &str) -> Result<Self, String> {
        let region = sdk
            .region()
            .ok_or("no AWS region: the sender cannot be invoked")?
            .to_string();
        let credentials = sdk
            .credentials_provider()
            .ok_or("no AWS credentials: the sender cannot be invoked")?;
        let endpoint = std::env::var("AWS_ENDPOINT_URL_LAMBDA")
            .ok()
            .filter(|url| !url.is_empty())
            .or_else(|| sdk.endpoint_url().map(str::to_string))
            .unwrap_or_else(|| format!("https://lambda.{region}.amazonaws.com"));
        Self::at(&endpoint, &region, credentials, function)
    }

    /// `function` at `endpoint`, signed for `region` with `credentials`.
    pub fn at(
        endpoint: &str,
        region: &str,
        credentials: SharedCredentialsProvider,
        function: &str,
    ) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|err| format!("no HTTP client: {err}"))?;
        let name = utf8_percent_encode(function, NON_ALPHANUMERIC);
        Ok(Self {
            client,
            url: format!(
                "{}/2015-03-31/functions/{name}/invocations",
                endpoint.trim_end_matches('/')
            ),
            region: region.to_string(),
            credentials,
        })
    }

    /// `outgoing` sent by the sender function: its answer, or `None` when
    /// none came back (the invoke failed, the sender crashed or timed
    /// out). Then nothing is recorded: the lease runs out and the attempt
    /// is made again under the same `webhook-id` (at least once).
    pub async fn send(&self, outgoing: &Outgoing) -> Option<Answer> {
        match self.invoke(outgoing).await {
            Ok(answer) => Some(answer),
            Err(why) => {
                tracing::error!(url = %self.url, %why, "webhook sender not invoked");
                None
            }
        }
    }

    async fn invoke(&self, outgoing: &Outgoing) -> Result<Answer, String> {
        let body = serde_json::to_vec(outgoing).map_err(|err| err.to_string())?;
        let credentials = self
            .credentials
            .provide_credentials()
            .await
            .map_err(|err| format!("no credentials: {err}"))?;
        let identity = credentials.into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("lambda")
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|err| err.to_string())?
            .into();
        let headers = [("content-type", "application/json")];
        let signable = SignableRequest::new(
            "POST",
            &self.url,
            headers.into_iter(),
            SignableBody::Bytes(&body),
        )
        .map_err(|err| err.to_string())?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|err| err.to_string())?
            .into_parts();
        let mut request = self
            .client
            .post(&self.url)
            .timeout(Duration::from_millis(outgoing.timeout_ms) + INVOKE_MARGIN)
            .header("content-type", "application/json");
        for (name, value) in instructions.headers() {
            request = request.header(name, value);
        }
        let response = request
            .body(body)
            .send()
            .await
            .map_err(|err| format!("invoke failed: {err}"))?;
        let status = response.status();
        // A function that failed (crashed, timed out) answers 200 with
        // this header and its error as the body.
        let function_error = response.headers().get("x-amz-function-error").cloned();
        let text = response
            .text()
            .await
            .map_err(|err| format!("no answer: {err}"))?;
        if !status.is_success() || function_error.is_some() {
            return Err(format!(
                "the invoke answered {status} {function_error:?}: {text}"
            ));
        }
        serde_json::from_str(&text).map_err(|err| format!("not an answer ({err}): {text}"))
    }
}

//! The boundary between the engine and whatever answers webhook calls.
//!
//! The engine never opens a socket. When it needs webhooks answered it hands a batch of
//! [`WebhookCall`]s to a [`Replier`] (one call for a mutating webhook, all matching validating
//! webhooks at once) and continues with the [`Reply`]s. A replier may be the HTTPS transport, a
//! set of recorded exchanges or a script; the engine cannot tell them apart.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::api::{ServiceReference, WebhookKind};

/// Everything needed to perform one webhook call.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookCall {
    /// Mutating or validating.
    pub phase: WebhookKind,
    /// Reinvocation round: 0, or 1 for the reinvocation pass.
    pub round: u8,
    /// Annotation index (mutating: position in the whole list; validating: among matching hooks).
    pub index: usize,
    /// Owning configuration's `metadata.name`.
    pub configuration: Arc<str>,
    /// The webhook's `name`.
    pub webhook: Arc<str>,
    /// Accessor UID `<configuration>/<webhook>/<n>`.
    pub uid: Arc<str>,
    /// Where to send it (shared by the calls of a webhook with the same `?timeout=`).
    pub endpoint: Arc<Endpoint>,
    /// PEM CA bundle from the configuration (`None`: system roots), shared by the webhook's calls.
    pub ca_bundle: Option<Arc<[u8]>>,
    /// Time left for this call (webhook timeout and request deadline, whichever is sooner).
    pub timeout: Duration,
    /// AdmissionReview version sent: `v1` or `v1beta1`.
    pub review_version: &'static str,
    /// `request.uid` of the AdmissionReview sent.
    pub request_uid: String,
    /// The AdmissionReview as JSON, exactly the bytes to POST (shared, not copied, by whatever
    /// sends them).
    pub body: bytes::Bytes,
}

/// Where a call goes, derived from `clientConfig` as upstream derives it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// Full request URL including `?timeout=<n>s`, e.g.
    /// `https://webhook.ns.svc:443/mutate?timeout=10s`.
    pub url: String,
    /// Host the certificate is verified against (and the SNI): the URL host, or
    /// `<service>.<namespace>.svc` for a service reference.
    pub server_name: String,
    /// Port to dial.
    pub port: u16,
    /// Credential lookup key: `host:port` (URL, `:443` appended when absent) or
    /// `<service>.<namespace>.svc:<port>`.
    pub auth_target: String,
    /// The service reference, when the webhook is reached through one.
    pub service: Option<ServiceReference>,
    /// Whether HTTP/2 may be negotiated (upstream: only for URL webhooks on localhost or a
    /// loopback IP; service webhooks use HTTP/1.1).
    pub http2: bool,
}

/// What became of one call, as observed by the replier.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The outcome.
    pub outcome: ReplyOutcome,
    /// Wall time the call took (or the scripted/recorded duration). The engine consumes it from
    /// the request deadline and records it in metrics.
    pub elapsed: Duration,
}

/// The outcome of one call.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyOutcome {
    /// An HTTP response arrived (any status).
    Http {
        /// HTTP status code.
        status: u16,
        /// `Content-Type` header, if any.
        content_type: Option<String>,
        /// The response body.
        body: Vec<u8>,
    },
    /// The client for this webhook could not be built (bad URL, unreadable CA bundle, credential
    /// resolution failure, …). Reported upstream as `could not get REST client: <message>`.
    ClientConfig(String),
    /// The request failed below HTTP (refused, reset, TLS, timeout, malformed response).
    Transport(TransportError),
    /// The parent request was cancelled before the call completed.
    Canceled,
    /// The code preparing the call panicked (upstream recovers these for validating webhooks).
    Panicked(String),
}

/// A failure below the HTTP layer, with enough detail to render Go's error text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportError {
    /// The class of failure.
    pub kind: TransportErrorKind,
    /// Cause as Go's net/http would phrase it, e.g.
    /// `dial tcp 127.0.0.1:8443: connect: connection refused` or
    /// `tls: failed to verify certificate: x509: certificate signed by unknown authority`.
    /// A failure after the webhook redirected the call carries Go's `url.Error` whole, naming
    /// the URL Go names (the hop's, or the `Location` that was refused):
    /// `Post "https://…/next": stopped after 10 redirects`.
    pub detail: String,
}

/// Classes of transport failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransportErrorKind {
    /// TCP connection refused or unreachable.
    Connect,
    /// Name resolution failed.
    Dns,
    /// TLS handshake or certificate verification failed.
    Tls,
    /// The call ran past its timeout.
    Timeout,
    /// The connection was reset or closed mid-exchange.
    Reset,
    /// The peer did not speak HTTP correctly.
    Malformed,
    /// Anything else.
    Other,
}

/// Something that answers webhook calls. Replies come back in the order of the calls.
pub trait Replier {
    /// Performs (or looks up, or scripts) the calls of one batch.
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send;
}

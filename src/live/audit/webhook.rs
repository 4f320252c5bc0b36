//! The apiserver's audit webhook backend: an HTTPS endpoint receiving `EventList` batches.
//!
//! kube-apiserver's webhook backend (`--audit-webhook-config-file`) POSTs each batch as one
//! `audit.k8s.io/v1` `EventList` in JSON (`Content-Type: application/json`) to the server URL of
//! its kubeconfig, path included, with a 30 s timeout; it retries any error (a non-2xx answer
//! included) with exponential backoff and drops the batch after its last try. This server answers
//! 200 once every event of a batch is in the channel, 400 with a message for a body that is not
//! an `EventList` (a retry would not help, but the apiserver retries all the same), and 503 when
//! the channel stayed full longer than [`AuditWebhookOptions::max_wait`], so that the apiserver
//! retries later rather than time out while its events are half delivered.

use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::mpsc::Sender;
use tokio_rustls::TlsAcceptor;

use super::{AuditFeed, Notice, Origin, RawEvent};
use crate::replay::IndexUnit;
use crate::webhook_server::serve::{accept_each, serve_http, text};
use crate::webhook_server::{Pki, PkiError};

/// The [`Origin::source`] of events received by the webhook backend.
pub const WEBHOOK_SOURCE: &str = "audit-webhook";

/// Starting the audit webhook backend failed.
#[derive(Debug, thiserror::Error)]
pub enum AuditWebhookError {
    /// The address is not a loopback address and [`AuditWebhookOptions::allow_non_loopback`] is
    /// off.
    #[error(
        "refusing to listen on {0}: not a loopback address (the apiserver must reach it: allow it explicitly)"
    )]
    NotLoopback(SocketAddr),
    /// Binding the listener failed.
    #[error("listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The cause.
        source: io::Error,
    },
    /// A certificate or key file could not be read.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// Minting the certificates failed.
    #[error(transparent)]
    Pki(#[from] PkiError),
    /// The TLS configuration was refused (bad certificate or key).
    #[error("tls: {0}")]
    Tls(#[from] rustls::Error),
    /// The path is not absolute.
    #[error("the path {0:?} must start with '/'")]
    Path(String),
}

/// The server's certificate.
#[derive(Debug, Clone, Default)]
pub enum WebhookTls {
    /// A CA and a server certificate minted at start, for the loopback names, the listening
    /// address and [`AuditWebhookOptions::host`].
    #[default]
    Mint,
    /// The user's certificate chain and private key (PEM files). The kubeconfig's
    /// `certificate-authority-data` is `ca` when given, else the chain itself (enough for a
    /// self-signed certificate).
    Files {
        /// Certificate chain, PEM (`--audit-webhook-cert`).
        cert: PathBuf,
        /// Private key, PEM (`--audit-webhook-key`).
        key: PathBuf,
        /// The CA that signed the certificate, PEM.
        ca: Option<PathBuf>,
    },
}

/// How the audit webhook backend listens.
#[derive(Debug, Clone)]
pub struct AuditWebhookOptions {
    /// Address to bind (`--audit-webhook ADDR`); port 0 picks a free port. Default `127.0.0.1:0`.
    pub listen: SocketAddr,
    /// Permit a non-loopback [`listen`](Self::listen) address. Off by default: the server takes
    /// whatever is posted to it.
    pub allow_non_loopback: bool,
    /// The host name or address the apiserver uses to reach the server, for the kubeconfig URL
    /// (and the minted certificate). Default: the listening address (`127.0.0.1` for an
    /// unspecified one).
    pub host: Option<String>,
    /// URL path events are posted to. Default `/audit`.
    pub path: String,
    /// The certificate.
    pub tls: WebhookTls,
    /// Largest body read; larger ones are answered 413. Default 256 MiB.
    pub max_body_bytes: usize,
    /// Longest a batch waits for room in the channel before it is answered 503 (the apiserver
    /// gives up on a request after 30 s and retries it). Default 20 s.
    pub max_wait: Duration,
}

impl Default for AuditWebhookOptions {
    fn default() -> Self {
        AuditWebhookOptions {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            allow_non_loopback: false,
            host: None,
            path: "/audit".into(),
            tls: WebhookTls::Mint,
            max_body_bytes: 256 << 20,
            max_wait: Duration::from_secs(20),
        }
    }
}

/// A running audit webhook backend. It stops when dropped (or on [`AuditWebhookServer::stop`]).
pub struct AuditWebhookServer {
    addr: SocketAddr,
    url: String,
    ca_pem: String,
    shared: Arc<Shared>,
    task: tokio::task::AbortHandle,
}

impl std::fmt::Debug for AuditWebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditWebhookServer")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

struct Shared {
    path: String,
    tx: Sender<AuditFeed>,
    max_body_bytes: usize,
    max_wait: Duration,
    /// Held while a batch is delivered, so that its events stay together and in order.
    delivering: tokio::sync::Mutex<()>,
    /// Events received so far (the next event's index is this plus one).
    events: AtomicUsize,
    batches: AtomicU64,
    refused: AtomicU64,
}

impl AuditWebhookServer {
    /// Starts serving on the current tokio runtime (call from inside one), sending the events of
    /// each batch to `tx` in order. The listener is bound before this returns.
    pub async fn start(
        options: AuditWebhookOptions,
        tx: Sender<AuditFeed>,
    ) -> Result<AuditWebhookServer, AuditWebhookError> {
        if !options.allow_non_loopback && !options.listen.ip().to_canonical().is_loopback() {
            return Err(AuditWebhookError::NotLoopback(options.listen));
        }
        if !options.path.starts_with('/') {
            return Err(AuditWebhookError::Path(options.path));
        }
        let bind_error = |source| AuditWebhookError::Bind {
            addr: options.listen,
            source,
        };
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;
        let host = match &options.host {
            Some(h) => h.clone(),
            None if addr.ip().is_unspecified() => "127.0.0.1".to_string(),
            None => addr.ip().to_string(),
        };
        let (chain, key, ca_pem) = certificate(&options.tls, &host)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let host_in_url = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        let url = format!("https://{host_in_url}:{}{}", addr.port(), options.path);
        let shared = Arc::new(Shared {
            path: options.path,
            tx,
            max_body_bytes: options.max_body_bytes,
            max_wait: options.max_wait,
            delivering: tokio::sync::Mutex::new(()),
            events: AtomicUsize::new(0),
            batches: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        });
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let serving = shared.clone();
        let task = tokio::spawn(accept_each(listener, move |tcp| {
            connection(tcp, acceptor.clone(), serving.clone())
        }));
        Ok(AuditWebhookServer {
            addr,
            url,
            ca_pem,
            shared,
            task: task.abort_handle(),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL the apiserver posts to, e.g. `https://127.0.0.1:40123/audit`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The CA certificate (PEM) the apiserver trusts the server with.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Events received so far.
    pub fn events_received(&self) -> usize {
        self.shared.events.load(Ordering::Relaxed)
    }

    /// Batches accepted so far.
    pub fn batches_received(&self) -> u64 {
        self.shared.batches.load(Ordering::Relaxed)
    }

    /// Requests answered with an error status so far.
    pub fn requests_refused(&self) -> u64 {
        self.shared.refused.load(Ordering::Relaxed)
    }

    /// The kubeconfig for the apiserver's `--audit-webhook-config-file`: one cluster whose server
    /// is [`url`](Self::url) and whose `certificate-authority-data` is the CA, an empty user, and
    /// a context, current.
    pub fn kubeconfig(&self) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(self.ca_pem.as_bytes());
        format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: hookscope\n  \
               cluster:\n    \
                 server: \"{url}\"\n    \
                 certificate-authority-data: {ca}\n\
             users:\n\
             - name: kube-apiserver\n  \
               user: {{}}\n\
             contexts:\n\
             - name: hookscope\n  \
               context:\n    \
                 cluster: hookscope\n    \
                 user: kube-apiserver\n\
             current-context: hookscope\n",
            url = self.url
        )
    }

    /// Stops serving: closes the listener and every connection.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for AuditWebhookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The certificate chain, key and CA PEM to serve with.
fn certificate(
    tls: &WebhookTls,
    host: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>, String), AuditWebhookError> {
    match tls {
        WebhookTls::Mint => {
            let pki = Pki::mint(&[host])?;
            Ok((
                pki.server_chain(),
                pki.server_key(),
                pki.ca_pem().to_string(),
            ))
        }
        WebhookTls::Files { cert, key, ca } => {
            let read = |path: &PathBuf| {
                std::fs::read(path).map_err(|e| AuditWebhookError::File {
                    path: path.clone(),
                    message: e.to_string(),
                })
            };
            let bad = |path: &PathBuf, message: String| AuditWebhookError::File {
                path: path.clone(),
                message,
            };
            let cert_pem = read(cert)?;
            let chain = CertificateDer::pem_slice_iter(&cert_pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(cert, format!("invalid PEM certificate: {e}")))?;
            if chain.is_empty() {
                return Err(bad(cert, "no PEM certificate in the file".into()));
            }
            let key_pem = read(key)?;
            let key_der = PrivateKeyDer::from_pem_slice(&key_pem)
                .map_err(|e| bad(key, format!("no PEM private key: {e}")))?;
            let ca_pem = match ca {
                Some(ca) => read(ca)?,
                None => cert_pem,
            };
            let ca_pem = String::from_utf8(ca_pem)
                .map_err(|_| bad(ca.as_ref().unwrap_or(cert), "not PEM text".into()))?;
            Ok((chain, key_der, ca_pem))
        }
    }
}

async fn connection(tcp: tokio::net::TcpStream, acceptor: TlsAcceptor, shared: Arc<Shared>) {
    let _ = tcp.set_nodelay(true);
    let Ok(tls) = acceptor.accept(tcp).await else {
        return;
    };
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let service = service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(handle(req, &shared).await) }
    });
    serve_http(tls, h2, service).await;
}

/// The top of an `EventList`: its type and its items, each kept as text.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventList<'a> {
    #[serde(borrow, default)]
    kind: Option<&'a str>,
    #[serde(borrow, default)]
    api_version: Option<&'a str>,
    #[serde(borrow, default)]
    items: Option<Vec<&'a RawValue>>,
}

/// The items of a posted body, or why it is not an `EventList`.
fn items(body: &[u8]) -> Result<Vec<&RawValue>, String> {
    let list: EventList<'_> = crate::json::from_slice(body)
        .map_err(|e| format!("the body is not an audit.k8s.io/v1 EventList: {e}"))?;
    if let Some(kind) = list.kind
        && kind != "EventList"
    {
        return Err(format!("kind {kind:?}: expected EventList"));
    }
    if let Some(v) = list.api_version
        && v != "audit.k8s.io/v1"
    {
        return Err(format!(
            "apiVersion {v:?}: expected audit.k8s.io/v1 (--audit-webhook-version)"
        ));
    }
    let items = list.items.unwrap_or_default();
    for (i, item) in items.iter().enumerate() {
        if !item.get().starts_with('{') {
            return Err(format!("items[{i}]: expected an audit Event object"));
        }
    }
    Ok(items)
}

async fn handle(req: Request<Incoming>, shared: &Shared) -> Response<Full<Bytes>> {
    let refuse = |status: StatusCode, message: String| async move {
        shared.refused.fetch_add(1, Ordering::Relaxed);
        // The answer does not wait for room: with the channel full, the notice is left out.
        let _ = shared.tx.try_send(AuditFeed::Notice(Notice::BatchRefused {
            status: status.as_u16(),
            message: message.clone(),
        }));
        text(status, &message)
    };
    if req.uri().path() != shared.path {
        return text(
            StatusCode::NOT_FOUND,
            &format!("404 page not found: audit events go to {}", shared.path),
        );
    }
    if req.method() != Method::POST {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "only POST: audit events are posted as an EventList",
        );
    }
    if let Some(ct) = req.headers().get(CONTENT_TYPE) {
        let media = ct
            .to_str()
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if media != "application/json" {
            let message = format!(
                "unsupported Content-Type {:?}: audit events are accepted as application/json",
                ct.to_str().unwrap_or("<not text>")
            );
            return refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, message).await;
        }
    }
    let body = match Limited::new(req.into_body(), shared.max_body_bytes)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            let message = format!("reading the body: {e}");
            return refuse(StatusCode::PAYLOAD_TOO_LARGE, message).await;
        }
    };
    let items = match items(&body) {
        Ok(items) => items,
        Err(message) => return refuse(StatusCode::BAD_REQUEST, message).await,
    };
    match deliver(shared, &body, &items).await {
        Ok(()) => {
            shared.batches.fetch_add(1, Ordering::Relaxed);
            let mut ok = Response::new(Full::new(Bytes::new()));
            *ok.status_mut() = StatusCode::OK;
            ok
        }
        Err(Undelivered::Closed) => {
            let message = "hookscope is no longer reading audit events".to_string();
            refuse(StatusCode::SERVICE_UNAVAILABLE, message).await
        }
        Err(Undelivered::Full) => {
            let message = format!(
                "hookscope is behind: no room for {} events within {:?}; retry later",
                items.len(),
                shared.max_wait
            );
            let mut r = refuse(StatusCode::SERVICE_UNAVAILABLE, message).await;
            r.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            r
        }
    }
}

enum Undelivered {
    Full,
    Closed,
}

/// Sends the items of a batch in order. Room for the whole batch (or as much as the channel
/// holds) is reserved before anything is sent, within `max_wait`; once part of a batch went out
/// the rest waits as long as it takes, since a refusal would make the apiserver send it all again.
async fn deliver(shared: &Shared, body: &Bytes, items: &[&RawValue]) -> Result<(), Undelivered> {
    let chunk = shared.tx.max_capacity().max(1);
    let mut parts = items.chunks(chunk);
    let Some(first) = parts.next() else {
        return Ok(());
    };
    let started = async {
        let guard = shared.delivering.lock().await;
        let permits = shared.tx.reserve_many(first.len()).await;
        (guard, permits)
    };
    let (_guard, permits) = tokio::time::timeout(shared.max_wait, started)
        .await
        .map_err(|_| Undelivered::Full)?;
    send(
        shared,
        body,
        first,
        permits.map_err(|_| Undelivered::Closed)?,
    );
    for part in parts {
        let permits = shared.tx.reserve_many(part.len()).await;
        send(
            shared,
            body,
            part,
            permits.map_err(|_| Undelivered::Closed)?,
        );
    }
    Ok(())
}

fn send(
    shared: &Shared,
    body: &Bytes,
    part: &[&RawValue],
    permits: tokio::sync::mpsc::PermitIterator<'_, AuditFeed>,
) {
    let start = shared.events.fetch_add(part.len(), Ordering::Relaxed);
    for (i, (permit, item)) in permits.zip(part).enumerate() {
        permit.send(AuditFeed::Event(RawEvent {
            origin: Origin {
                source: WEBHOOK_SOURCE.to_string(),
                index: start + i + 1,
                unit: IndexUnit::Document,
            },
            text: body.slice_ref(item.get().as_bytes()),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_list_items() {
        let body = br#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[{"auditID":"a"},{"auditID":"b"}]}"#;
        let found = items(body).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[1].get(), r#"{"auditID":"b"}"#);
        assert!(items(br#"{"kind":"PodList","items":[]}"#).is_err());
        assert!(items(br#"{"apiVersion":"audit.k8s.io/v1beta1"}"#).is_err());
        assert!(items(br#"{"items":[1]}"#).is_err());
        assert!(items(b"not json").is_err());
    }
}

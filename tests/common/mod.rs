//! Shared test support: a per-test PKI and an HTTPS webhook server that records what it receives.
//!
//! Use from an integration test with `mod common;`. The server runs on its own runtime thread, so
//! sync and async tests can both use it; it listens on 127.0.0.1 only and stops when dropped.
#![allow(dead_code)]

pub mod hostile;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

/// The service name the test server certificate always carries (`<svc>.<ns>.svc`).
pub const SERVICE_HOST: &str = "webhook-test.default.svc";

static SERIAL: AtomicUsize = AtomicUsize::new(1);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A CA, a server certificate and a client certificate, minted fresh.
pub struct TestPki {
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    server_cert_pem: String,
    server_key_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
}

impl TestPki {
    /// Server SANs: 127.0.0.1, ::1, localhost, [`SERVICE_HOST`].
    pub fn new() -> Self {
        Self::with_names(&[])
    }

    /// Like [`TestPki::new`] with extra server SANs (DNS names or IP addresses).
    pub fn with_names(extra: &[&str]) -> Self {
        let id = SERIAL.fetch_add(1, Ordering::Relaxed);
        let ca_key = KeyPair::generate().expect("ca key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(
            DnType::CommonName,
            format!("hookscope test CA {id}-{}", std::process::id()),
        );
        let ca_cert = ca_params.self_signed(&ca_key).expect("ca cert");
        let issuer = Issuer::new(ca_params, ca_key);

        let mut sans: Vec<String> = ["127.0.0.1", "::1", "localhost", SERVICE_HOST]
            .iter()
            .map(|s| s.to_string())
            .collect();
        sans.extend(extra.iter().map(|s| s.to_string()));
        let server_key = KeyPair::generate().expect("server key");
        let mut server_params = CertificateParams::new(sans).expect("server params");
        server_params
            .distinguished_name
            .push(DnType::CommonName, "webhook-test");
        server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_cert = server_params
            .signed_by(&server_key, &issuer)
            .expect("server cert");

        let client_key = KeyPair::generate().expect("client key");
        let mut client_params = CertificateParams::new(Vec::<String>::new()).expect("client");
        client_params
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver-admission");
        client_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_cert = client_params
            .signed_by(&client_key, &issuer)
            .expect("client cert");

        Self {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().clone(),
            server_cert_pem: server_cert.pem(),
            server_key_pem: server_key.serialize_pem(),
            client_cert_pem: client_cert.pem(),
            client_key_pem: client_key.serialize_pem(),
        }
    }

    /// The CA certificate, PEM (a webhook's `caBundle`).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA certificate, DER.
    pub fn ca_der(&self) -> CertificateDer<'static> {
        self.ca_der.clone()
    }

    /// The server certificate, PEM.
    pub fn server_cert_pem(&self) -> &str {
        &self.server_cert_pem
    }

    /// The server key, PEM.
    pub fn server_key_pem(&self) -> &str {
        &self.server_key_pem
    }

    /// A client certificate signed by the CA, PEM.
    pub fn client_cert_pem(&self) -> &str {
        &self.client_cert_pem
    }

    /// The client certificate's key, PEM.
    pub fn client_key_pem(&self) -> &str {
        &self.client_key_pem
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: String,
    /// Path including the query, e.g. `/allow?timeout=10s`.
    pub path: String,
    /// Headers in arrival order, names lower-case.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// ALPN protocol negotiated on the connection (`h2`, `http/1.1`), if any.
    pub alpn: Option<String>,
    /// `HTTP/1.1` or `HTTP/2.0`.
    pub version: String,
    /// Sequence number of the TLS connection it arrived on (0-based).
    pub connection: usize,
    /// Whether the client presented a certificate.
    pub client_cert: bool,
    /// When the request was complete.
    pub received_at: Instant,
    /// When the answer was handed to the connection (after any delay).
    pub responded_at: Option<Instant>,
}

impl RecordedRequest {
    /// The first value of a header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of a header.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .filter(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The path without the query.
    pub fn path_only(&self) -> &str {
        self.path.split('?').next().unwrap_or_default()
    }

    /// `request.uid` of the AdmissionReview in the body, if any.
    pub fn review_uid(&self) -> Option<String> {
        let v: serde_json::Value = serde_json::from_slice(&self.body).ok()?;
        v.get("request")?.get("uid")?.as_str().map(str::to_string)
    }
}

/// What to do after an optional delay.
#[derive(Debug, Clone)]
pub enum Action {
    /// Send the response.
    Respond,
    /// Never answer (until the client gives up).
    Hang,
    /// Close the connection without an answer.
    Close,
    /// Write these bytes on the raw (TLS) stream and close, like Go's `Hijack` (HTTP/1.1 only).
    Raw(Vec<u8>),
}

/// A handler's answer.
#[derive(Debug, Clone)]
pub struct TestResponse {
    /// HTTP status.
    pub status: u16,
    /// Headers.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
    /// Wait this long before acting.
    pub delay: Option<Duration>,
    /// What to do.
    pub action: Action,
}

impl TestResponse {
    /// A response with the given status, content type and body.
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.into(),
            delay: None,
            action: Action::Respond,
        }
    }

    /// `application/json`.
    pub fn json(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self::new(status, "application/json", body)
    }

    /// Go's `http.Error`: `text/plain; charset=utf-8`, `nosniff`, message plus newline.
    pub fn go_error(status: u16, msg: &str) -> Self {
        let mut r = Self::new(status, "text/plain; charset=utf-8", format!("{msg}\n"));
        r.headers
            .push(("X-Content-Type-Options".into(), "nosniff".into()));
        r
    }

    /// Go's `http.NotFound`.
    pub fn not_found() -> Self {
        Self::go_error(404, "404 page not found")
    }

    /// Never answers.
    pub fn hang() -> Self {
        Self {
            action: Action::Hang,
            ..Self::new(200, "application/json", Vec::new())
        }
    }

    /// Closes the connection without answering.
    pub fn close() -> Self {
        Self {
            action: Action::Close,
            ..Self::new(200, "application/json", Vec::new())
        }
    }

    /// Writes raw bytes on the connection and closes it.
    pub fn raw(bytes: impl Into<Vec<u8>>) -> Self {
        Self {
            action: Action::Raw(bytes.into()),
            ..Self::new(200, "application/json", Vec::new())
        }
    }

    /// Adds a header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Waits before acting.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }
}

/// A request handler.
pub type Handler = Arc<dyn Fn(&RecordedRequest) -> TestResponse + Send + Sync>;

/// Wraps a closure as a [`Handler`].
pub fn handler(f: impl Fn(&RecordedRequest) -> TestResponse + Send + Sync + 'static) -> Handler {
    Arc::new(f)
}

/// Go's `json.NewEncoder(w).Encode(v)` of a v1beta1 AdmissionReview with only `response` set.
fn v1beta1_review(response: &str) -> TestResponse {
    TestResponse::json(200, format!("{{\"response\":{response}}}\n"))
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The upstream unit-test webhook server (`testing/webhook_server.go` `webhookHandler`, plus the
/// `ClockSteppingWebhookHandler` paths `/allow/<n>` and `/disallow/<n>`).
pub fn upstream_handler() -> Handler {
    handler(|req| upstream_answer(req.path_only()))
}

fn upstream_answer(path: &str) -> TestResponse {
    const ALLOW: &str = r#"{"uid":"","allowed":true,"auditAnnotations":{"key1":"value1"}}"#;
    const DISALLOW: &str = r#"{"uid":"","allowed":false,"status":{"metadata":{},"code":403}}"#;
    if let Some((kind, digits)) = path
        .strip_prefix('/')
        .and_then(|p| p.split_once('/'))
        .filter(|(k, d)| {
            matches!(*k, "allow" | "disallow")
                && (1..=10).contains(&d.len())
                && d.bytes().all(|b| b.is_ascii_digit())
        })
    {
        let _ = digits;
        return v1beta1_review(if kind == "allow" { ALLOW } else { DISALLOW });
    }
    let patch = |p: &str, audit: bool| {
        let audit = if audit {
            r#","auditAnnotations":{"key1":"value1"}"#
        } else {
            ""
        };
        v1beta1_review(&format!(
            r#"{{"uid":"","allowed":true,"patch":"{}","patchType":"JSONPatch"{audit}}}"#,
            b64(p)
        ))
    };
    match path {
        "/internalErr" => TestResponse::go_error(500, "webhook internal server error"),
        "/invalidReq" => TestResponse::raw(b"HTTP/1.1 101 Switching Protocols\r\n\r\n".to_vec()),
        "/invalidResp" => TestResponse::json(200, "webhook invalid response"),
        "/disallow" => v1beta1_review(DISALLOW),
        "/disallowReason" => v1beta1_review(
            r#"{"uid":"","allowed":false,"status":{"metadata":{},"message":"you shall not pass","code":403}}"#,
        ),
        "/shouldNotBeCalled" => v1beta1_review(
            r#"{"uid":"","allowed":false,"status":{"metadata":{},"message":"doesn't expect labels to match object selector","code":403}}"#,
        ),
        "/allow" => v1beta1_review(ALLOW),
        "/removeLabel" => patch(
            r#"[{"op": "remove", "path": "/metadata/labels/remove"}]"#,
            true,
        ),
        "/addLabel" => patch(
            r#"[{"op": "add", "path": "/metadata/labels/added", "value": "test"}]"#,
            false,
        ),
        "/invalidPatch" => patch("[{", false),
        "/invalidMutation" => patch(r#"[{"op": "add", "CORRUPTED_KEY":}]"#, false),
        "/nonStatusError" => TestResponse::raw(b"bad-http".to_vec()),
        "/nilResponse" => TestResponse::json(200, "{}\n"),
        "/invalidAnnotation" => v1beta1_review(
            r#"{"uid":"","allowed":true,"auditAnnotations":{"invalid*key":"value1"}}"#,
        ),
        "/noop" => v1beta1_review(r#"{"uid":"","allowed":true}"#),
        _ => TestResponse::not_found(),
    }
}

fn v1_review(response: serde_json::Value) -> TestResponse {
    let body = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    });
    TestResponse::json(200, serde_json::to_vec(&body).unwrap_or_default())
}

/// A v1 response allowing the request, echoing `uid`.
pub fn v1_allow(uid: &str) -> TestResponse {
    v1_review(serde_json::json!({"uid": uid, "allowed": true}))
}

/// A v1 response allowing with a JSON patch (given as JSON text), echoing `uid`.
pub fn v1_patch(uid: &str, patch_json: &str) -> TestResponse {
    v1_review(serde_json::json!({
        "uid": uid,
        "allowed": true,
        "patchType": "JSONPatch",
        "patch": b64(patch_json),
    }))
}

/// A v1 response denying with the given code and message, echoing `uid`.
pub fn v1_deny(uid: &str, code: u16, msg: &str) -> TestResponse {
    v1_review(serde_json::json!({
        "uid": uid,
        "allowed": false,
        "status": {"code": code, "message": msg},
    }))
}

/// The field errors of each admission policy in `text` (read as the file `name`), defaulted
/// then validated as the apiserver does on create, by policy name in document order.
pub fn policy_field_errors(text: &str, name: &str) -> Vec<(String, Vec<String>)> {
    hookscope::config::parse_policy_documents(text, name)
        .into_iter()
        .map(|loaded| {
            let mut loaded = loaded.unwrap();
            loaded.apply_defaults();
            let errors = hookscope::config::policy::validate_policy_object(&loaded.object)
                .iter()
                .map(ToString::to_string)
                .collect();
            (loaded.object.name().to_string(), errors)
        })
        .collect()
}

/// A handler answering every request with [`v1_allow`] for the request's uid.
pub fn v1_allow_handler() -> Handler {
    handler(|req| v1_allow(&req.review_uid().unwrap_or_default()))
}

/// Server options.
#[derive(Clone)]
pub struct ServerOptions {
    /// Require and verify a client certificate signed by the test CA (upstream's test server
    /// does).
    pub require_client_cert: bool,
    /// ALPN protocols offered, in preference order.
    pub alpn: Vec<Vec<u8>>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            require_client_cert: false,
            alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        }
    }
}

struct Shared {
    handler: Handler,
    requests: Mutex<Vec<RecordedRequest>>,
    connections: AtomicUsize,
    handshakes: AtomicUsize,
}

/// An HTTPS webhook server on 127.0.0.1 with a random port.
pub struct WebhookServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl WebhookServer {
    /// Starts a server with default options (no client certificate required, h2 and http/1.1).
    pub fn start(pki: &TestPki, handler: Handler) -> Self {
        Self::start_with(pki, handler, ServerOptions::default())
    }

    /// Starts a server with options.
    pub fn start_with(pki: &TestPki, handler: Handler, opts: ServerOptions) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(pki.server_cert_pem().as_bytes())
                .collect::<Result<_, _>>()
                .expect("server cert pem");
        let key = PrivateKeyDer::from_pem_slice(pki.server_key_pem().as_bytes()).expect("key");
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("versions");
        let mut config = if opts.require_client_cert {
            let mut roots = RootCertStore::empty();
            roots.add(pki.ca_der()).expect("ca");
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .expect("client verifier");
            builder
                .with_client_cert_verifier(verifier)
                .with_single_cert(certs, key)
                .expect("server config")
        } else {
            builder
                .with_no_client_auth()
                .with_single_cert(certs, key)
                .expect("server config")
        };
        config.alpn_protocols = opts.alpn.clone();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));

        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let shared = Arc::new(Shared {
            handler,
            requests: Mutex::new(Vec::new()),
            connections: AtomicUsize::new(0),
            handshakes: AtomicUsize::new(0),
        });
        let (stop_tx, stop_rx) = oneshot::channel();
        let thread_shared = shared.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("server runtime");
            rt.block_on(serve(listener, acceptor, thread_shared, stop_rx));
            rt.shutdown_background();
        });
        Self {
            addr,
            shared,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `https://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// Every complete request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// TLS handshakes completed so far.
    pub fn handshakes(&self) -> usize {
        self.shared.handshakes.load(Ordering::SeqCst)
    }
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    listener: std::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else { continue };
                let id = shared.connections.fetch_add(1, Ordering::SeqCst);
                tasks.spawn(connection(tcp, acceptor.clone(), shared.clone(), id));
            }
        }
    }
    tasks.abort_all();
}

async fn connection(
    tcp: tokio::net::TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    shared: Arc<Shared>,
    id: usize,
) {
    let _ = tcp.set_nodelay(true);
    let Ok(tls) = acceptor.accept(tcp).await else {
        return;
    };
    shared.handshakes.fetch_add(1, Ordering::SeqCst);
    let (_, session) = tls.get_ref();
    let alpn = session
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    let client_cert = session.peer_certificates().is_some_and(|c| !c.is_empty());
    let raw = RawHandle::default();
    let io = TokioIo::new(Hijackable {
        inner: tls,
        raw: raw.clone(),
        written: 0,
    });
    let conn_info = ConnInfo {
        alpn: alpn.clone(),
        client_cert,
        id,
    };
    let service = service_fn(move |req| {
        let shared = shared.clone();
        let raw = raw.clone();
        let info = conn_info.clone();
        async move { Ok::<_, io::Error>(handle(req, shared, raw, info).await) }
    });
    if alpn.as_deref() == Some("h2") {
        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(io, service)
            .await;
    } else {
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(io, service)
            .await;
    }
}

#[derive(Clone)]
struct ConnInfo {
    alpn: Option<String>,
    client_cert: bool,
    id: usize,
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    raw: RawHandle,
    info: ConnInfo,
) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    let mut headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    if let Some(authority) = parts.uri.authority()
        && !headers.iter().any(|(k, _)| k == "host")
    {
        headers.insert(0, ("host".into(), authority.to_string()));
    }
    let record = RecordedRequest {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| "/".to_string(), |p| p.as_str().to_string()),
        headers,
        body,
        alpn: info.alpn,
        version: format!("{:?}", parts.version),
        connection: info.id,
        client_cert: info.client_cert,
        received_at: Instant::now(),
        responded_at: None,
    };
    let answer = (shared.handler)(&record);
    let index = {
        let mut requests = lock(&shared.requests);
        requests.push(record);
        requests.len() - 1
    };
    if let Some(delay) = answer.delay {
        tokio::time::sleep(delay).await;
    }
    lock(&shared.requests)[index].responded_at = Some(Instant::now());
    match answer.action {
        Action::Respond => {}
        Action::Hang => std::future::pending::<()>().await,
        Action::Close => raw.hijack(Vec::new()),
        Action::Raw(bytes) => raw.hijack(bytes),
    }
    let mut builder = Response::builder().status(answer.status);
    for (k, v) in &answer.headers {
        builder = builder.header(k, v);
    }
    builder
        .body(Full::new(Bytes::from(answer.body)))
        .unwrap_or_default()
}

/// Lets a handler take over the connection's byte stream.
#[derive(Clone, Default)]
struct RawHandle(Arc<Mutex<Option<Vec<u8>>>>);

impl RawHandle {
    fn hijack(&self, bytes: Vec<u8>) {
        *lock(&self.0) = Some(bytes);
    }

    fn take(&self) -> Option<Vec<u8>> {
        lock(&self.0).clone()
    }
}

/// The TLS stream under hyper. Once hijacked, the first write hyper attempts is replaced by the
/// hijacker's bytes, the stream is shut down, and hyper sees a broken pipe.
struct Hijackable {
    inner: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    raw: RawHandle,
    written: usize,
}

impl AsyncRead for Hijackable {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Hijackable {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let Some(bytes) = self.raw.take() else {
            return Pin::new(&mut self.inner).poll_write(cx, buf);
        };
        while self.written < bytes.len() {
            let from = self.written;
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[from..]) {
                Poll::Ready(Ok(n)) => self.written += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        match Pin::new(&mut self.inner).poll_shutdown(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(_) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "connection hijacked",
            ))),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A `--resolve`-style map sending `host:port` to the server.
pub fn resolve_to(server: &WebhookServer, host: &str, port: u16) -> HashMap<String, SocketAddr> {
    HashMap::from([(format!("{host}:{port}"), server.addr())])
}

/// A call to a URL webhook (`https://127.0.0.1:<port><path>`), HTTP/2 allowed as upstream allows
/// it for loopback URLs, with `?timeout=` rendered from `timeout`.
pub fn url_call(
    url: &str,
    ca_pem: Option<&str>,
    timeout: Duration,
) -> hookscope::engine::call::WebhookCall {
    let uri: http::Uri = url.parse().expect("url");
    let host = uri
        .host()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_string();
    let port = uri.port_u16().unwrap_or(443);
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let auth_target = match uri.port_u16() {
        Some(_) => uri.authority().map(|a| a.to_string()).unwrap_or_default(),
        None => format!("{}:443", uri.host().unwrap_or_default()),
    };
    let endpoint = hookscope::engine::call::Endpoint {
        url: with_timeout(url, timeout),
        server_name: host,
        port,
        auth_target,
        service: None,
        http2: loopback,
    };
    base_call(endpoint, ca_pem, timeout)
}

/// A call to a service webhook `<name>.<namespace>.svc:<port><path>` (HTTP/1.1 only).
pub fn service_call(
    name: &str,
    namespace: &str,
    port: u16,
    path: &str,
    ca_pem: Option<&str>,
    timeout: Duration,
) -> hookscope::engine::call::WebhookCall {
    let host = format!("{name}.{namespace}.svc");
    let endpoint = hookscope::engine::call::Endpoint {
        url: with_timeout(&format!("https://{host}:{port}{path}"), timeout),
        server_name: host.clone(),
        port,
        auth_target: format!("{host}:{port}"),
        service: Some(hookscope::api::ServiceReference {
            namespace: namespace.to_string(),
            name: name.to_string(),
            path: Some(path.to_string()),
            port: Some(i32::from(port)),
        }),
        http2: false,
    };
    base_call(endpoint, ca_pem, timeout)
}

fn with_timeout(url: &str, timeout: Duration) -> String {
    let secs = timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0);
    format!("{url}?timeout={secs}s")
}

fn base_call(
    endpoint: hookscope::engine::call::Endpoint,
    ca_pem: Option<&str>,
    timeout: Duration,
) -> hookscope::engine::call::WebhookCall {
    let uid = format!("uid-{}", SERIAL.fetch_add(1, Ordering::Relaxed));
    let body = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": uid},
    });
    hookscope::engine::call::WebhookCall {
        phase: hookscope::api::WebhookKind::Validating,
        round: 0,
        index: 0,
        configuration: "test-webhooks".into(),
        webhook: "test.webhook.io".into(),
        uid: "test-webhooks/test.webhook.io/0".into(),
        endpoint: endpoint.into(),
        ca_bundle: ca_pem.map(|c| c.as_bytes().into()),
        timeout,
        review_version: "v1",
        request_uid: uid,
        body: serde_json::to_vec(&body).unwrap_or_default().into(),
    }
}

/// A JSON pointer token for `key`.
pub fn escape_pointer(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The recorded webhook server's three behaviours (tests/fixtures/oracle-v1.32/README.md).
pub fn oracle_handler() -> Handler {
    handler(|req| {
        let review: serde_json::Value =
            serde_json::from_slice(&req.body).unwrap_or(serde_json::Value::Null);
        let uid = review["request"]["uid"].as_str().unwrap_or_default();
        let object = &review["request"]["object"];
        let add = |key: &str, value: &str| {
            let patch = match object.pointer("/metadata/labels") {
                Some(serde_json::Value::Object(_)) => serde_json::json!([{
                    "op": "add",
                    "path": format!("/metadata/labels/{}", escape_pointer(key)),
                    "value": value,
                }]),
                _ => {
                    serde_json::json!([{"op": "add", "path": "/metadata/labels", "value": {key: value}}])
                }
            };
            v1_patch(uid, &patch.to_string())
        };
        match req.path_only() {
            "/add-label" => add("oracle.test/mutated-by", "add-label"),
            "/add-label-b" => add("oracle.test/mutated-by-b", "add-label-b"),
            "/deny" => v1_deny(uid, 403, "denied by oracle deny webhook"),
            _ => TestResponse::not_found(),
        }
    })
}

/// A loopback port where connections are refused, and stay refused while this lives: the port is
/// bound but never listened on, so no other test can be given it meanwhile (a port bound and
/// released could be).
pub struct RefusingPort {
    _socket: tokio::net::TcpSocket,
    port: u16,
}

impl RefusingPort {
    pub fn new() -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .expect("bind");
        let port = socket.local_addr().expect("addr").port();
        RefusingPort {
            _socket: socket,
            port,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

/// The captured requests among replay input `items`.
pub fn requests(
    items: &[hookscope::replay::InputItem],
) -> Vec<&hookscope::replay::CapturedRequest> {
    items
        .iter()
        .filter_map(|i| match i {
            hookscope::replay::InputItem::Request(r) => Some(&**r),
            _ => None,
        })
        .collect()
}

/// Dispatches `request` through `engine` with `replier` (real HTTPS, or scripted) on a runtime of
/// its own, with upstream's
/// 30 s request deadline: the outcome and the metrics it recorded.
pub fn dispatch_on_runtime<R: hookscope::engine::Replier + Send>(
    engine: &hookscope::engine::Engine,
    request: hookscope::engine::Attributes,
    replier: &mut R,
) -> (hookscope::engine::Outcome, hookscope::metrics::Metrics) {
    use hookscope::engine::{Namespaces, Phases, RequestContext, SequentialIds};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (mut ids, mut metrics) = (SequentialIds::default(), hookscope::metrics::Metrics::new());
    let ctx = RequestContext {
        namespaces: &Namespaces::default(),
        ids: &mut ids,
        metrics: &mut metrics,
        deadline: Some(Duration::from_secs(30)),
        phases: Phases::All,
    };
    let outcome = runtime.block_on(engine.dispatch(request, ctx, replier));
    (outcome, metrics)
}

/// One kubeconfig with the contexts `alpha` (server `a`) and `beta` (server `b`), `alpha`
/// current: two single-context kubeconfigs merged by hand.
pub fn two_context_kubeconfig(
    a: &hookscope::fake_apiserver::FakeApiServer,
    b: &hookscope::fake_apiserver::FakeApiServer,
) -> String {
    // Two single-context kubeconfigs merged by hand: clusters, users and contexts of both.
    let doc_a: serde_json::Value = serde_saphyr::from_str(&a.kubeconfig_named("alpha")).unwrap();
    let doc_b: serde_json::Value = serde_saphyr::from_str(&b.kubeconfig_named("beta")).unwrap();
    let mut merged = doc_a.clone();
    for key in ["clusters", "users", "contexts"] {
        let list = merged[key].as_array_mut().unwrap();
        list.extend(doc_b[key].as_array().unwrap().iter().cloned());
    }
    serde_json::to_string(&merged).unwrap()
}

/// The field errors kube-apiserver reports on creating each policy or binding of `yaml` (after
/// defaulting), by object name, in kubectl's rendering: one error as is, several as `[a, b]`,
/// none as an empty string.
pub fn policy_create_errors(yaml: &str, file: &str) -> Vec<(String, String)> {
    policy_field_errors(yaml, file)
        .into_iter()
        .map(|(name, errors)| {
            let text = match errors.as_slice() {
                [] => String::new(),
                [one] => one.clone(),
                many => format!("[{}]", many.join(", ")),
            };
            (name, text)
        })
        .collect()
}

/// `base` with each key of `spec` set over it, or removed when its value is null.
pub fn merged(
    mut base: serde_json::Value,
    spec: &serde_json::Map<String, serde_json::Value>,
) -> serde_json::Value {
    for (k, v) in spec {
        if v.is_null() {
            if let Some(object) = base.as_object_mut() {
                object.remove(k);
            }
        } else {
            base[k] = v.clone();
        }
    }
    base
}

/// The final stage (`ResponseComplete`) of every event of an audit log, by auditID.
pub fn completed_audit_events(log: &str) -> std::collections::BTreeMap<String, serde_json::Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete")
        .map(|e| (e["auditID"].as_str().unwrap_or_default().to_string(), e))
        .collect()
}

/// A recorded session's webhook configurations (`text`) pointing at `server` instead of the
/// recorded server's `recorded_url`, with `pki`'s CA as every `caBundle`, written as
/// `webhooks.yaml` into a fresh directory `dir` of the tests' temporary directory.
pub fn rewritten_webhooks_file(
    pki: &TestPki,
    server: &WebhookServer,
    text: &str,
    recorded_url: &str,
    dir: &str,
) -> std::path::PathBuf {
    use base64::Engine as _;
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(dir);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ca = base64::engine::general_purpose::STANDARD.encode(pki.ca_pem());
    let webhooks: String = text
        .lines()
        .map(|l| match l.split_once("caBundle: ") {
            Some((indent, _)) => format!("{indent}caBundle: {ca}\n"),
            None => format!("{}\n", l.replace(recorded_url, &server.url(""))),
        })
        .collect();
    let path = dir.join("webhooks.yaml");
    std::fs::write(&path, webhooks).unwrap();
    path
}

//! The HTTPS replier: TLS configuration cache, per-configuration connection pools, and one
//! exchange per webhook call.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http::header::{
    ACCEPT, ACCEPT_ENCODING, AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE, HeaderValue,
    RETRY_AFTER, USER_AGENT,
};
use http::{HeaderMap, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::auth::{Credentials, WebhookAuth};
use super::errors::{self, ConnAddrs, Phase};
use super::h1::{H1Conn, H1Error, H1Io};
use super::pem;
use super::record::RecordTcp;
use super::redirect::{self, Hop, HopUrl};
use crate::engine::call::{
    Endpoint, Replier, Reply, ReplyOutcome, TransportError, TransportErrorKind, WebhookCall,
};
use crate::registry::FxHasher;

/// The HTTP client timeout kube-apiserver sets on every webhook client (`setGlobalDefaults`).
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
/// The user agent kube-apiserver sends to webhooks.
pub const USER_AGENT_VALUE: &str = "kube-apiserver-admission";
/// client-go's `TLSHandshakeTimeout` (its transport cache sets it on every client).
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The `SETTINGS_MAX_HEADER_LIST_SIZE` Go's HTTP/2 transport advertises and enforces when
/// `MaxResponseHeaderBytes` is unset, as in client-go: 10 MiB (hyper's default is 16 KiB).
const H2_MAX_HEADER_LIST: u32 = 10 << 20;
/// client-go's `MaxIdleConnsPerHost`.
const DEFAULT_MAX_IDLE: usize = 25;
/// client-go's limit on retries driven by `Retry-After`.
const MAX_RETRIES: u32 = 10;
/// The `Accept` header of kube-apiserver's webhook client.
pub(super) const ACCEPT_VALUE: &str = "application/json, */*";
/// The `Content-Type` of every review sent.
pub(super) const CONTENT_TYPE_VALUE: &str = "application/json";

/// Options of the HTTPS replier.
#[derive(Debug, Clone)]
pub struct HttpsOptions {
    /// Credentials per target (the apiserver's webhook `kubeConfigFile`).
    pub auth: WebhookAuth,
    /// Dial overrides, `host:port` → address, like curl's `--resolve`. Service endpoints
    /// (`<svc>.<ns>.svc:<port>`) can only be reached through an entry here.
    pub resolve: HashMap<String, SocketAddr>,
    /// Trust anchors added to every configuration (tests, private CAs).
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// Largest response body accepted. client-go has no limit, nor has the default
    /// (`usize::MAX`); a smaller value is a safety bound of the caller's choosing.
    pub max_response_bytes: usize,
    /// Idle connections kept per pool.
    pub max_idle_per_pool: usize,
    /// How long a TLS handshake may take: client-go's `TLSHandshakeTimeout`, 10 s.
    pub tls_handshake_timeout: Duration,
}

impl Default for HttpsOptions {
    fn default() -> Self {
        Self {
            auth: WebhookAuth::empty(),
            resolve: HashMap::new(),
            extra_roots: Vec::new(),
            max_response_bytes: usize::MAX,
            max_idle_per_pool: DEFAULT_MAX_IDLE,
            tls_handshake_timeout: TLS_HANDSHAKE_TIMEOUT,
        }
    }
}

/// Answers webhook calls over real HTTPS. Calls of one batch run concurrently; connections are
/// kept alive and reused per client configuration (CA bundle, credentials, server name and port,
/// HTTP/2 permission). Must be driven inside a tokio runtime.
#[derive(Clone)]
pub struct HttpsReplier {
    inner: Arc<Inner>,
}

struct Inner {
    opts: HttpsOptions,
    provider: Arc<CryptoProvider>,
    tls: Mutex<HashMap<TlsKey, Arc<ClientConfig>>>,
    pools: Mutex<HashMap<PoolKey, Arc<Pool>>>,
    /// The TLS configuration and pool of each webhook client seen, by a digest of what decides
    /// them, so a call finds both without copying or hashing its caBundle twice.
    clients: Mutex<HashMap<u64, Vec<Client>>>,
    /// What the calls of one shared endpoint and caBundle (one webhook, one `?timeout=`) reuse,
    /// found by pointer: most calls skip the digest, the URL parse and the header checks.
    targets: Mutex<Vec<Arc<Target>>>,
    /// Connections to where webhooks redirected their calls, per TLS configuration (by address;
    /// 0 for plain HTTP), dial host, port and server name.
    hop_pools: Mutex<HashMap<HopPoolKey, Arc<Pool>>>,
}

/// A redirect target's pool: TLS configuration (by address, 0 for plain HTTP), dial host, port
/// and server name.
type HopPoolKey = (usize, String, u16, String);

/// Targets remembered before the list starts again (each is small; a replay has a few).
const MAX_TARGETS: usize = 256;

/// A call's destination as the transport prepares it: client, pool, request target and `Host`.
struct Target {
    /// Held so that the pointer identity the lookup relies on stays valid.
    endpoint: Arc<Endpoint>,
    ca_bundle: Option<Arc<[u8]>>,
    tls: Arc<ClientConfig>,
    pool: Arc<Pool>,
    request_target: Uri,
    /// The headers every HTTP/2 call sends (user agent, accept, content type, gzip accepted),
    /// copied into each request instead of being inserted one by one.
    headers: HeaderMap,
    /// The start of every HTTP/1.1 request: request line, `Host` and `User-Agent`.
    h1_head: Vec<u8>,
}

impl Target {
    fn serves(&self, call: &WebhookCall) -> bool {
        Arc::ptr_eq(&self.endpoint, &call.endpoint)
            && match (&self.ca_bundle, &call.ca_bundle) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
    }
}

/// What a webhook call's client is made of (its credentials follow from `auth_target`), with the
/// TLS configuration and connection pool built for it.
struct Client {
    http2: bool,
    ca_bundle: Option<Arc<[u8]>>,
    auth_target: String,
    server_name: String,
    port: u16,
    tls: Arc<ClientConfig>,
    pool: Arc<Pool>,
}

impl Client {
    fn digest(call: &WebhookCall) -> u64 {
        let mut d = FxHasher::default();
        let e = &call.endpoint;
        (
            e.http2,
            &call.ca_bundle,
            &e.auth_target,
            &e.server_name,
            e.port,
        )
            .hash(&mut d);
        d.finish()
    }

    fn serves(&self, call: &WebhookCall) -> bool {
        let e = &call.endpoint;
        self.http2 == e.http2
            && self.port == e.port
            && self.ca_bundle == call.ca_bundle
            && self.auth_target == e.auth_target
            && self.server_name == e.server_name
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct TlsKey {
    http2: bool,
    ca: Vec<u8>,
    cert: Option<(Vec<u8>, Vec<u8>)>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct PoolKey {
    tls: TlsKey,
    server_name: String,
    port: u16,
}

#[derive(Default)]
struct Pool {
    #[expect(
        clippy::vec_box,
        reason = "a connection (TLS state included) moves between pool and call as a pointer"
    )]
    idle: Mutex<Vec<Box<H1Conn>>>,
    h2: Mutex<Option<H2Conn>>,
    dial: tokio::sync::Mutex<()>,
}

#[derive(Clone)]
struct H2Conn {
    sender: http2::SendRequest<Full<Bytes>>,
    addrs: ConnAddrs,
    ended: Ended,
}

/// Reports how a connection task ended: `Some(None)` cleanly, `Some(Some(e))` with an error.
type Ended = tokio::sync::watch::Receiver<Option<Option<TransportError>>>;

/// Why a connection refused a request it never sent: the error its task ended with.
async fn ended_error(mut ended: Ended) -> TransportError {
    let closed = || errors::transport(TransportErrorKind::Reset, "EOF");
    match tokio::time::timeout(Duration::from_secs(1), ended.wait_for(Option::is_some)).await {
        Ok(Ok(v)) => v.clone().flatten().unwrap_or_else(closed),
        _ => closed(),
    }
}

enum Conn {
    H1(Box<H1Conn>),
    H2(H2Conn),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl std::fmt::Debug for HttpsReplier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpsReplier").finish_non_exhaustive()
    }
}

impl HttpsReplier {
    /// A replier with the given options.
    pub fn new(opts: HttpsOptions) -> Self {
        Self {
            inner: Arc::new(Inner {
                opts,
                provider: Arc::new(rustls::crypto::ring::default_provider()),
                tls: Mutex::new(HashMap::new()),
                pools: Mutex::new(HashMap::new()),
                clients: Mutex::new(HashMap::new()),
                targets: Mutex::new(Vec::new()),
                hop_pools: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Performs one call.
    pub async fn call(&self, call: &WebhookCall) -> Reply {
        let start = Instant::now();
        let outcome = self.inner.perform(call).await;
        Reply {
            outcome,
            elapsed: start.elapsed(),
        }
    }
}

impl Replier for HttpsReplier {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        let this = self.clone();
        async move {
            if calls.len() <= 1 {
                let mut out = Vec::with_capacity(calls.len());
                for call in calls {
                    out.push(this.call(call).await);
                }
                return out;
            }
            let started = Instant::now();
            let mut handles = AbortOnDrop(
                calls
                    .iter()
                    .map(|call| {
                        let this = this.clone();
                        let call = call.clone();
                        tokio::spawn(async move { this.call(&call).await })
                    })
                    .collect(),
            );
            let mut out = Vec::with_capacity(handles.0.len());
            for handle in &mut handles.0 {
                out.push(handle.await.unwrap_or_else(|e| Reply {
                    outcome: ReplyOutcome::Panicked(panic_text(e)),
                    elapsed: started.elapsed(),
                }));
            }
            out
        }
    }
}

/// Aborts the calls of a batch whose caller went away (the parent request was cancelled).
struct AbortOnDrop(Vec<tokio::task::JoinHandle<Reply>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for handle in &self.0 {
            handle.abort();
        }
    }
}

fn panic_text(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_string()),
        Err(e) => e.to_string(),
    }
}

/// What one exchange produced.
struct Answer {
    status: u16,
    content_type: Option<String>,
    /// The raw `Retry-After` of a 429 or 5xx answer.
    retry_after: Option<String>,
    /// Whether the body is still gzip-encoded.
    gzip: bool,
    body: Vec<u8>,
    /// A redirect's `Location` (its body was not kept).
    location: Option<String>,
}

impl Inner {
    async fn perform(&self, call: &WebhookCall) -> ReplyOutcome {
        let endpoint = &call.endpoint;
        let cached = self.cached_target(call);
        let uri = match &cached {
            Some(_) => None,
            None => match endpoint.url.parse::<Uri>() {
                Ok(u) => Some(u),
                Err(e) => {
                    return ReplyOutcome::ClientConfig(format!("parse {:?}: {e}", endpoint.url));
                }
            },
        };
        let creds = if self.opts.auth.is_empty() {
            None
        } else {
            match self.opts.auth.resolve(&endpoint.auth_target) {
                Ok(c) => c,
                Err(e) => return ReplyOutcome::ClientConfig(e.to_string()),
            }
        };
        let target = match (cached, uri) {
            (Some(t), _) => t,
            (None, uri) => match self.new_target(call, uri, creds) {
                Ok(t) => t,
                Err(msg) => return ReplyOutcome::ClientConfig(msg),
            },
        };
        let auth = match creds.map(auth_headers).transpose() {
            Ok(h) => h.unwrap_or_default(),
            Err(msg) => return ReplyOutcome::ClientConfig(msg),
        };
        let client_timeout = call.timeout >= CLIENT_TIMEOUT;
        let limit = call.timeout.min(CLIENT_TIMEOUT);
        let phase = AtomicU8::new(0);
        // The URL of the redirect being followed, which Go names in a timeout's error.
        let hop_url = Mutex::new(None);
        // Boxed: the exchange's state (TLS, HTTP) is most of a call's, and every future that
        // awaits a call up to the replay's would otherwise hold it and be moved with it.
        let exchange = Box::pin(self.exchange(&target, call, &auth, &phase, &hop_url));
        match tokio::time::timeout(limit, exchange).await {
            Ok(Ok(a)) => ReplyOutcome::Http {
                status: a.status,
                content_type: a.content_type,
                body: a.body,
            },
            Ok(Err(e)) => ReplyOutcome::Transport(e),
            Err(_) => {
                let e = errors::timeout_error(phase_of(&phase), client_timeout);
                ReplyOutcome::Transport(match lock(&hop_url).take() {
                    Some(url) => redirect::hop_error(&url, e),
                    None => e,
                })
            }
        }
    }

    /// The target of a call seen before: the same shared endpoint and caBundle.
    fn cached_target(&self, call: &WebhookCall) -> Option<Arc<Target>> {
        lock(&self.targets)
            .iter()
            .find(|t| t.serves(call))
            .map(Arc::clone)
    }

    /// Builds (and remembers) what calls to this endpoint share.
    fn new_target(
        &self,
        call: &WebhookCall,
        uri: Option<Uri>,
        creds: Option<&Credentials>,
    ) -> Result<Arc<Target>, String> {
        let endpoint = &call.endpoint;
        let uri = match uri {
            Some(u) => u,
            None => endpoint
                .url
                .parse::<Uri>()
                .map_err(|e| format!("parse {:?}: {e}", endpoint.url))?,
        };
        let (tls, pool) = self.client(call, creds)?;
        let authority = uri
            .authority()
            .map(|a| a.as_str().to_string())
            .ok_or_else(|| format!("parse {:?}: missing host", endpoint.url))?;
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let request_target: Uri = if endpoint.http2 {
            format!("https://{authority}{path}")
                .parse()
                .map_err(|e| format!("parse {:?}: {e}", endpoint.url))?
        } else {
            path.parse()
                .map_err(|e| format!("parse {:?}: {e}", endpoint.url))?
        };
        // HTTP/2 carries the authority in the request target, not in a Host header.
        let host = HeaderValue::from_str(&authority).map_err(|e| e.to_string())?;
        let mut headers = HeaderMap::with_capacity(4);
        headers.insert(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
        headers.insert(ACCEPT, HeaderValue::from_static(ACCEPT_VALUE));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE_VALUE));
        headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        // Go's `Request.write`: request line, Host, User-Agent, then the length and the
        // remaining headers.
        let mut h1_head = Vec::with_capacity(64 + path.len() + authority.len());
        for part in [
            "POST ",
            path,
            " HTTP/1.1\r\nHost: ",
            host.to_str().map_err(|e| e.to_string())?,
            "\r\nUser-Agent: ",
            USER_AGENT_VALUE,
            "\r\n",
        ] {
            h1_head.extend_from_slice(part.as_bytes());
        }
        let target = Arc::new(Target {
            endpoint: Arc::clone(endpoint),
            ca_bundle: call.ca_bundle.clone(),
            tls,
            pool,
            request_target,
            headers,
            h1_head,
        });
        let mut targets = lock(&self.targets);
        if targets.len() >= MAX_TARGETS {
            targets.clear();
        }
        targets.push(Arc::clone(&target));
        Ok(target)
    }

    /// The TLS configuration and connection pool for a call: found by the call's client digest,
    /// else built (failures are not kept: each call reports them again, as before caching).
    fn client(
        &self,
        call: &WebhookCall,
        creds: Option<&Credentials>,
    ) -> Result<(Arc<ClientConfig>, Arc<Pool>), String> {
        let digest = Client::digest(call);
        if let Some(c) = lock(&self.clients)
            .get(&digest)
            .and_then(|cs| cs.iter().find(|c| c.serves(call)))
        {
            return Ok((c.tls.clone(), c.pool.clone()));
        }
        let endpoint = &call.endpoint;
        let (tls_key, tls) = self.tls_config(call, creds)?;
        let pool = self.pool(PoolKey {
            tls: tls_key,
            server_name: endpoint.server_name.clone(),
            port: endpoint.port,
        });
        let mut clients = lock(&self.clients);
        let same = clients.entry(digest).or_default();
        if !same.iter().any(|c| c.serves(call)) {
            same.push(Client {
                http2: endpoint.http2,
                ca_bundle: call.ca_bundle.clone(),
                auth_target: endpoint.auth_target.clone(),
                server_name: endpoint.server_name.clone(),
                port: endpoint.port,
                tls: tls.clone(),
                pool: pool.clone(),
            });
        }
        Ok((tls, pool))
    }

    fn tls_config(
        &self,
        call: &WebhookCall,
        creds: Option<&Credentials>,
    ) -> Result<(TlsKey, Arc<ClientConfig>), String> {
        let mut ca = Vec::new();
        if let Some(extra) = creds
            .and_then(|c| c.ca_pem.as_ref())
            .filter(|c| !c.is_empty())
        {
            ca.extend_from_slice(extra);
            ca.push(b'\n');
        }
        if let Some(bundle) = &call.ca_bundle {
            ca.extend_from_slice(bundle);
        }
        let cert = creds
            .filter(|c| c.has_client_cert())
            .and_then(|c| Some((c.client_cert_pem.clone()?, c.client_key_pem.clone()?)));
        let key = TlsKey {
            http2: call.endpoint.http2,
            ca,
            cert,
        };
        if let Some(cfg) = lock(&self.tls).get(&key) {
            return Ok((key, cfg.clone()));
        }
        let cfg = Arc::new(self.build_tls(&key)?);
        lock(&self.tls).insert(key.clone(), cfg.clone());
        Ok((key, cfg))
    }

    fn build_tls(&self, key: &TlsKey) -> Result<ClientConfig, String> {
        let mut roots = RootCertStore::empty();
        if key.ca.is_empty() {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        } else {
            pem::add_ca_bundle(&mut roots, &key.ca)?;
        }
        for extra in &self.opts.extra_roots {
            let _ = roots.add(extra.clone());
        }
        let builder = ClientConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("tls: {e}"))?
            .with_root_certificates(roots);
        let mut cfg = match &key.cert {
            Some((cert, pkey)) => {
                let certified = pem::key_pair(cert, pkey, &self.provider)?;
                builder.with_client_cert_resolver(Arc::new(SingleCert(Arc::new(certified))))
            }
            None => builder.with_no_client_auth(),
        };
        cfg.alpn_protocols = if key.http2 {
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        } else {
            vec![b"http/1.1".to_vec()]
        };
        Ok(cfg)
    }

    fn pool(&self, key: PoolKey) -> Arc<Pool> {
        lock(&self.pools).entry(key).or_default().clone()
    }

    /// One call: a round trip and the redirects it leads to, repeated while the final answer is
    /// a 429 or 5xx with a `Retry-After` (client-go's retries).
    async fn exchange(
        &self,
        target: &Target,
        call: &WebhookCall,
        auth: &HeaderMap,
        phase: &AtomicU8,
        hop_url: &Mutex<Option<String>>,
    ) -> Result<Answer, TransportError> {
        let mut retries = 0;
        loop {
            set_phase(phase, Phase::Connecting);
            let mut answer = self.round_trip(target, call, auth, phase, None).await?;
            if answer.location.is_some() {
                answer = Box::pin(self.follow(target, call, auth, phase, answer, hop_url)).await?;
            }
            // client-go decides on a retry before it reads the body.
            if retries < MAX_RETRIES
                && let Some(wait) = answer.retry_after.as_deref().and_then(retry_after)
            {
                retries += 1;
                tokio::time::sleep(wait).await;
                continue;
            }
            if answer.gzip {
                answer.body = gunzip(&answer.body, self.opts.max_response_bytes)?;
                answer.gzip = false;
            }
            return Ok(answer);
        }
    }

    /// Follows the redirects of `answer` as Go's `http.Client` follows them (`Client.do`, the
    /// default `CheckRedirect`): the final answer, or the error Go's client returns, wrapped as
    /// its `url.Error` with the URL it names.
    async fn follow(
        &self,
        target: &Target,
        call: &WebhookCall,
        auth: &HeaderMap,
        phase: &AtomicU8,
        mut answer: Answer,
        hop_url: &Mutex<Option<String>>,
    ) -> Result<Answer, TransportError> {
        let mut current = HopUrl::parse(&target.endpoint.url)
            .map_err(|e| errors::transport(TransportErrorKind::Other, format!("parse: {e}")))?;
        let mut sent = 1;
        let mut post = true;
        while let Some(location) = answer.location.take() {
            let hop = redirect::next_hop(&current, &location, answer.status, post, sent)?;
            post = hop.post;
            *lock(hop_url) = Some(hop.url.to_string());
            set_phase(phase, Phase::Connecting);
            answer = self
                .round_trip(target, call, auth, phase, Some(&hop))
                .await
                .map_err(|e| redirect::hop_error(&hop.url.to_string(), e))?;
            sent += 1;
            current = hop.url;
        }
        Ok(answer)
    }

    /// The pool of connections to where a redirect leads: the webhook's own when the hop goes
    /// back to it.
    fn hop_pool(&self, target: &Target, hop: &Hop, server_name: &str) -> Arc<Pool> {
        let endpoint = &*target.endpoint;
        if hop.url.https
            && hop.url.port == endpoint.port
            && hop.url.host == dial_host(endpoint)
            && server_name == endpoint.server_name
        {
            return target.pool.clone();
        }
        let tls = if hop.url.https {
            Arc::as_ptr(&target.tls) as usize
        } else {
            0
        };
        let key = (
            tls,
            hop.url.host.clone(),
            hop.url.port,
            server_name.to_string(),
        );
        let mut pools = lock(&self.hop_pools);
        if pools.len() >= MAX_TARGETS && !pools.contains_key(&key) {
            pools.clear();
        }
        pools.entry(key).or_default().clone()
    }

    /// Sends on a pooled connection, or on a new one. A request refused by a reused connection
    /// before anything was written is sent again on a fresh connection, as Go's transport does.
    /// `hop` is where a redirect leads, when the request follows one.
    async fn round_trip(
        &self,
        target: &Target,
        call: &WebhookCall,
        auth: &HeaderMap,
        phase: &AtomicU8,
        hop: Option<&Hop>,
    ) -> Result<Answer, TransportError> {
        let endpoint = &*target.endpoint;
        let dial = match hop {
            None => Dial {
                host: dial_host(endpoint),
                port: endpoint.port,
                service: endpoint.service.is_some(),
                server_name: endpoint.server_name.as_str(),
                tls: Some(&target.tls),
            },
            Some(hop) => Dial {
                host: &hop.url.host,
                port: hop.url.port,
                service: false,
                // A service webhook's client names the service in every TLS handshake; a URL
                // webhook's names the host it dials.
                server_name: if endpoint.service.is_some() {
                    endpoint.server_name.as_str()
                } else {
                    hop.url.host.as_str()
                },
                tls: hop.url.https.then_some(&target.tls),
            },
        };
        let hop_pool;
        let pool = match hop {
            None => &*target.pool,
            Some(hop) => {
                hop_pool = self.hop_pool(target, hop, dial.server_name);
                &*hop_pool
            }
        };
        let http2 = endpoint.http2 && dial.tls.is_some();
        if let Some(conn) = take_pooled(pool) {
            match self
                .send_on(target, (pool, hop), conn, call, auth, phase)
                .await
            {
                Ok(a) => return Ok(a),
                Err(SendError::Failed(e)) => return Err(e),
                Err(SendError::NotSent(_)) => set_phase(phase, Phase::Connecting),
            }
        }
        let conn = if http2 {
            let _guard = pool.dial.lock().await;
            match take_pooled(pool) {
                Some(conn) => conn,
                None => Box::pin(self.connect(pool, &dial)).await?,
            }
        } else {
            // Dialling and the TLS handshake make a large future, needed only for a new
            // connection: boxed, it stays out of every call's state.
            Box::pin(self.connect(pool, &dial)).await?
        };
        match self
            .send_on(target, (pool, hop), conn, call, auth, phase)
            .await
        {
            Ok(a) => Ok(a),
            Err(SendError::Failed(e)) => Err(e),
            Err(SendError::NotSent(NotSent::H1(e))) => Err(e),
            Err(SendError::NotSent(NotSent::H2(ended))) => Err(ended_error(ended).await),
        }
    }

    async fn send_on(
        &self,
        target: &Target,
        (pool, hop): (&Pool, Option<&Hop>),
        conn: Conn,
        call: &WebhookCall,
        auth: &HeaderMap,
        phase: &AtomicU8,
    ) -> Result<Answer, SendError> {
        set_phase(phase, Phase::AwaitingHeaders);
        match conn {
            Conn::H2(mut h2) => {
                let request = match hop {
                    None => build_request(call, target, auth),
                    Some(hop) => redirect::h2_request(hop, call, &target.headers, auth),
                }
                .map_err(|e| SendError::Failed(errors::transport(TransportErrorKind::Other, e)))?;
                let addrs = h2.addrs;
                let response = match h2.sender.try_send_request(request).await {
                    Ok(resp) => resp,
                    Err(mut e) => {
                        return Err(match e.take_message() {
                            Some(_) => {
                                lock(&pool.h2).take();
                                SendError::NotSent(NotSent::H2(h2.ended))
                            }
                            None => SendError::Failed(hyper_error(e.error(), &addrs)),
                        });
                    }
                };
                set_phase(phase, Phase::ReadingBody);
                let status = response.status().as_u16();
                let header = |name| {
                    response
                        .headers()
                        .get(name)
                        .map(|v: &HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned())
                };
                let retry_after = if status == 429 || status >= 500 {
                    header(RETRY_AFTER)
                } else {
                    None
                };
                let content_type = header(CONTENT_TYPE);
                let gzip = response
                    .headers()
                    .get(CONTENT_ENCODING)
                    .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
                let location = if super::h1::is_redirect(status) {
                    header(http::header::LOCATION).filter(|l| !l.is_empty())
                } else {
                    None
                };
                if location.is_some() {
                    // Skimmed, not kept: the stream is reset when the body is dropped.
                    return Ok(Answer {
                        status,
                        content_type,
                        retry_after: None,
                        gzip: false,
                        body: Vec::new(),
                        location,
                    });
                }
                let body = self
                    .read_body(response.into_body(), &addrs)
                    .await
                    .map_err(SendError::Failed)?;
                Ok(Answer {
                    status,
                    content_type,
                    retry_after,
                    gzip,
                    body,
                    location: None,
                })
            }
            Conn::H1(mut h1) => {
                let encode = |out: &mut Vec<u8>| match hop {
                    None => encode_h1(out, &target.h1_head, &call.body, auth),
                    Some(hop) => redirect::encode_h1(out, hop, &call.body, auth),
                };
                match h1
                    .exchange(encode, self.opts.max_response_bytes, phase)
                    .await
                {
                    Ok(a) => {
                        if a.reusable {
                            self.park(pool, h1);
                        }
                        Ok(Answer {
                            status: a.status,
                            content_type: a.content_type,
                            retry_after: a.retry_after,
                            gzip: a.gzip,
                            body: a.body,
                            location: a.location,
                        })
                    }
                    Err(H1Error::NotSent(e)) => Err(SendError::NotSent(NotSent::H1(e))),
                    Err(H1Error::Failed(e)) => Err(SendError::Failed(e)),
                }
            }
        }
    }

    async fn read_body(
        &self,
        mut body: Incoming,
        addrs: &ConnAddrs,
    ) -> Result<Vec<u8>, TransportError> {
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                let inner = hyper_error(&e, addrs);
                errors::transport(inner.kind, errors::body_error(&inner.detail))
            })?;
            if let Ok(data) = frame.into_data() {
                if out.len() + data.len() > self.opts.max_response_bytes {
                    return Err(errors::body_too_large(self.opts.max_response_bytes));
                }
                out.extend_from_slice(&data);
            }
        }
        Ok(out)
    }

    /// Returns an HTTP/1.1 connection whose answer was read to its end to the pool.
    fn park(&self, pool: &Pool, conn: Box<H1Conn>) {
        let mut idle = lock(&pool.idle);
        if idle.len() < self.opts.max_idle_per_pool {
            idle.push(conn);
        }
    }

    async fn connect(&self, pool: &Pool, dial: &Dial<'_>) -> Result<Conn, TransportError> {
        let host = dial.host;
        let candidates = self.dial_addrs(dial).await?;
        let mut last = None;
        let mut stream = None;
        for addr in candidates {
            match TcpStream::connect(addr).await {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => {
                    if last.is_none() {
                        last = Some(errors::dial_error(addr, &e));
                    }
                }
            }
        }
        let Some(tcp) = stream else {
            return Err(last.unwrap_or_else(|| errors::lookup_error(host)));
        };
        let _ = tcp.set_nodelay(true);
        let addrs = ConnAddrs {
            local: tcp.local_addr().ok(),
            remote: tcp.peer_addr().map_err(|e| {
                errors::transport(TransportErrorKind::Connect, format!("dial tcp: {e}"))
            })?,
        };
        let Some(tls) = dial.tls else {
            return Ok(Conn::H1(Box::new(H1Conn::new(H1Io::Plain(tcp), addrs))));
        };
        let name = dial
            .server_name
            .trim_start_matches('[')
            .trim_end_matches(']');
        let server_name = ServerName::try_from(name.to_string()).map_err(|_| {
            errors::transport(
                TransportErrorKind::Tls,
                format!("tls: invalid server name {}", crate::gofmt::quote(name)),
            )
        })?;
        let handshake = TlsConnector::from(tls.clone()).connect(server_name, RecordTcp::new(tcp));
        let stream = tokio::time::timeout(self.opts.tls_handshake_timeout, handshake)
            .await
            .map_err(|_| {
                errors::transport(
                    TransportErrorKind::Timeout,
                    "net/http: TLS handshake timeout",
                )
            })?
            .map_err(|e| {
                let mut err = errors::io_error(&addrs, &e, false);
                if err.kind != TransportErrorKind::Timeout {
                    err.kind = TransportErrorKind::Tls;
                }
                err
            })?;
        if stream.get_ref().1.alpn_protocol() != Some(b"h2") {
            return Ok(Conn::H1(Box::new(H1Conn::new(H1Io::Tls(stream), addrs))));
        }
        let read_error = ReadError::default();
        let io = TokioIo::new(H2Stream {
            inner: stream,
            read_error: read_error.clone(),
            addrs,
        });
        let (end_tx, ended) = tokio::sync::watch::channel(None);
        let (sender, conn) = http2::Builder::new(TokioExecutor::new())
            .max_header_list_size(H2_MAX_HEADER_LIST)
            .handshake(io)
            .await
            .map_err(|e| hyper_error(&e, &addrs))?;
        tokio::spawn(async move {
            let end = conn.await.err().map(|e| hyper_error(&e, &addrs));
            let _ = end_tx.send(Some(end.or_else(|| read_error.get())));
        });
        let conn = H2Conn {
            sender,
            addrs,
            ended,
        };
        *lock(&pool.h2) = Some(conn.clone());
        Ok(Conn::H2(conn))
    }

    async fn dial_addrs(&self, dial: &Dial<'_>) -> Result<Vec<SocketAddr>, TransportError> {
        let (host, port) = (dial.host, dial.port);
        let resolve = &self.opts.resolve;
        let bracketed = format!("[{host}]:{port}");
        let plain = format!("{host}:{port}");
        if let Some(addr) = resolve.get(&plain).or_else(|| resolve.get(&bracketed)) {
            return Ok(vec![*addr]);
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        if dial.service {
            return Err(errors::lookup_error(host));
        }
        match tokio::net::lookup_host((host, port)).await {
            Ok(addrs) => {
                let addrs: Vec<_> = addrs.collect();
                if addrs.is_empty() {
                    Err(errors::lookup_error(host))
                } else {
                    Ok(addrs)
                }
            }
            Err(_) => Err(errors::lookup_error(host)),
        }
    }
}

/// Where a connection goes: the host and port dialled (through the resolve map first), whether
/// it is a service's (resolved only through that map), the name the TLS handshake verifies, and
/// the TLS configuration (none for plain HTTP).
struct Dial<'a> {
    host: &'a str,
    port: u16,
    service: bool,
    server_name: &'a str,
    tls: Option<&'a Arc<ClientConfig>>,
}

/// The host a webhook's endpoint is dialled at: its server name without IPv6 brackets.
fn dial_host(endpoint: &Endpoint) -> &str {
    endpoint
        .server_name
        .trim_start_matches('[')
        .trim_end_matches(']')
}

enum SendError {
    NotSent(NotSent),
    Failed(TransportError),
}

/// A request a connection refused before writing it, and what tells why.
enum NotSent {
    H1(TransportError),
    /// The HTTP/2 connection task's end, which holds its error.
    H2(Ended),
}

/// A pooled connection that can carry a request: the shared HTTP/2 one, else the most recently
/// parked HTTP/1.1 one still open (those closed by the server meanwhile are dropped).
fn take_pooled(pool: &Pool) -> Option<Conn> {
    if let Some(h2) = lock(&pool.h2).as_ref()
        && !h2.sender.is_closed()
    {
        return Some(Conn::H2(h2.clone()));
    }
    let mut idle = lock(&pool.idle);
    while let Some(mut conn) = idle.pop() {
        if conn.is_open() {
            return Some(Conn::H1(conn));
        }
    }
    None
}

pub(super) fn set_phase(phase: &AtomicU8, p: Phase) {
    phase.store(p as u8, Ordering::Relaxed);
}

fn phase_of(phase: &AtomicU8) -> Phase {
    match phase.load(Ordering::Relaxed) {
        0 => Phase::Connecting,
        1 => Phase::AwaitingHeaders,
        _ => Phase::ReadingBody,
    }
}

/// Go's transparent gzip (`gzipReader`): the body decoded, every member in turn as
/// `gzip.Reader` reads a multistream, failures in Go's words. An empty body decodes to nothing.
fn gunzip(data: &[u8], limit: usize) -> Result<Vec<u8>, TransportError> {
    use std::io::Read as _;
    let mut out = Vec::new();
    if data.is_empty() {
        return Ok(out);
    }
    let decoded = flate2::read::MultiGzDecoder::new(data)
        .take((limit as u64).saturating_add(1))
        .read_to_end(&mut out);
    let cause = match decoded {
        Ok(_) if out.len() > limit => return Err(errors::body_too_large(limit)),
        Ok(_) => return Ok(out),
        Err(e) => gzip_cause(&e),
    };
    Err(errors::transport(
        TransportErrorKind::Malformed,
        errors::body_error(&cause),
    ))
}

/// Go's text for a gzip decoding failure (`compress/gzip`, `compress/flate`).
fn gzip_cause(e: &io::Error) -> String {
    let text = e.to_string();
    if e.kind() == io::ErrorKind::UnexpectedEof || text.contains("incomplete deflate stream") {
        "unexpected EOF".into()
    } else if text.contains("invalid gzip header") {
        "gzip: invalid header".into()
    } else if text.contains("checksum") {
        "gzip: invalid checksum".into()
    } else if text.contains("corrupt deflate stream") {
        // Go adds the offset in the compressed stream, which the decoder here does not report.
        "flate: corrupt input".into()
    } else {
        text
    }
}

/// client-go's `retryAfterSeconds`: an integer `Retry-After`.
fn retry_after(value: &str) -> Option<Duration> {
    let secs: i64 = value.parse().ok()?;
    Some(Duration::from_secs(secs.max(0).unsigned_abs()).min(CLIENT_TIMEOUT))
}

/// Maps a hyper (HTTP/2) failure on an established connection to Go's wording.
fn hyper_error(e: &hyper::Error, addrs: &ConnAddrs) -> TransportError {
    if e.is_parse() || e.is_parse_status() || e.is_parse_too_large() {
        return errors::transport(TransportErrorKind::Malformed, e.to_string());
    }
    if let Some(io) = errors::find_io(e) {
        return errors::io_error(addrs, io, false);
    }
    if e.is_incomplete_message() {
        return errors::transport(TransportErrorKind::Reset, "EOF");
    }
    let text = std::iter::successors(Some(e as &(dyn std::error::Error + 'static)), |err| {
        err.source()
    })
    .map(ToString::to_string)
    .collect::<Vec<_>>()
    .join(": ");
    let kind = if e.is_canceled() || e.is_closed() {
        TransportErrorKind::Reset
    } else {
        TransportErrorKind::Other
    };
    errors::transport(kind, text)
}

/// The headers credentials add to a call (client-go's bearer and basic auth round trippers,
/// impersonation), checked as client-go checks them.
fn auth_headers(c: &Credentials) -> Result<HeaderMap, String> {
    let mut headers = HeaderMap::new();
    let has_basic = c.username.is_some() || c.password.is_some();
    let token = c.bearer_token.as_deref().filter(|t| !t.is_empty());
    if has_basic && token.is_some() {
        return Err("username/password or bearer token may be set, but not both".into());
    }
    if let Some(token) = token {
        let value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| "invalid bearer token".to_string())?;
        headers.insert(AUTHORIZATION, value);
    } else if has_basic {
        let pair = format!(
            "{}:{}",
            c.username.as_deref().unwrap_or_default(),
            c.password.as_deref().unwrap_or_default()
        );
        let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
        let value = HeaderValue::from_str(&format!("Basic {encoded}"))
            .map_err(|_| "invalid basic auth".to_string())?;
        headers.insert(AUTHORIZATION, value);
    }
    if let Some(imp) = &c.impersonate {
        let value = |s: &str| {
            HeaderValue::from_str(s).map_err(|_| format!("invalid impersonation value {s:?}"))
        };
        headers.insert("Impersonate-User", value(&imp.user)?);
        if let Some(uid) = &imp.uid {
            headers.insert("Impersonate-Uid", value(uid)?);
        }
        for group in &imp.groups {
            headers.append("Impersonate-Group", value(group)?);
        }
        for (k, vs) in &imp.extra {
            let name = http::HeaderName::from_bytes(
                format!("Impersonate-Extra-{}", escape_extra_key(k)).as_bytes(),
            )
            .map_err(|_| format!("invalid impersonation extra key {k:?}"))?;
            for v in vs {
                headers.append(name.clone(), value(v)?);
            }
        }
    }
    Ok(headers)
}

/// An HTTP/2 request.
fn build_request(
    call: &WebhookCall,
    target: &Target,
    auth: &HeaderMap,
) -> Result<Request<Full<Bytes>>, String> {
    let mut req = Request::post(target.request_target.clone());
    let headers = req
        .headers_mut()
        .ok_or_else(|| "invalid request".to_string())?;
    headers.clone_from(&target.headers);
    for (name, value) in auth {
        headers.append(name, value.clone());
    }
    req.body(Full::new(call.body.clone()))
        .map_err(|e| e.to_string())
}

/// An HTTP/1.1 request, head and body, as Go's `Request.write` lays it out: request line,
/// `Host`, `User-Agent`, `Content-Length`, the other headers sorted by their canonical name, then
/// the `Accept-Encoding: gzip` Go's transport adds (it decodes gzipped answers itself).
fn encode_h1(out: &mut Vec<u8>, head: &[u8], body: &[u8], auth: &HeaderMap) {
    out.reserve(head.len() + 128 + body.len());
    out.extend_from_slice(head);
    out.extend_from_slice(b"Content-Length: ");
    crate::gofmt::push_decimal(out, false, body.len() as u64);
    out.extend_from_slice(b"\r\n");
    if auth.is_empty() {
        out.extend_from_slice(
            b"Accept: application/json, */*\r\nContent-Type: application/json\r\n\
              Accept-Encoding: gzip\r\n\r\n",
        );
    } else {
        let mut fields: Vec<(String, &[u8])> = vec![
            ("Accept".into(), ACCEPT_VALUE.as_bytes()),
            ("Content-Type".into(), CONTENT_TYPE_VALUE.as_bytes()),
        ];
        fields.extend(
            auth.iter()
                .map(|(name, value)| (canonical_header(name.as_str()), value.as_bytes())),
        );
        // Stable: the values of one header keep their order.
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, value) in fields {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        // The transport's own header comes after the request's.
        out.extend_from_slice(b"Accept-Encoding: gzip\r\n\r\n");
    }
    out.extend_from_slice(body);
}

/// Go's `CanonicalMIMEHeaderKey` of a (lower-case) header name: each word capitalised.
pub(super) fn canonical_header(name: &str) -> String {
    let mut upper = true;
    name.chars()
        .map(|c| {
            let out = if upper {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            };
            upper = c == '-';
            out
        })
        .collect()
}

/// client-go's `headerKeyEscape`: percent-encodes everything but legal header-name bytes.
fn escape_extra_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        let legal = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        if legal {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[derive(Debug)]
struct SingleCert(Arc<rustls::sign::CertifiedKey>);

impl rustls::client::ResolvesClientCert for SingleCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// The read error that ended an HTTP/2 connection (hyper drops errors of idle connections).
#[derive(Clone, Default)]
struct ReadError(Arc<Mutex<Option<TransportError>>>);

impl ReadError {
    fn get(&self) -> Option<TransportError> {
        lock(&self.0).clone()
    }

    fn record(&self, e: TransportError) {
        lock(&self.0).get_or_insert(e);
    }
}

/// The TLS stream under an HTTP/2 connection, keeping the read error that ended it.
struct H2Stream {
    inner: TlsStream<RecordTcp>,
    read_error: ReadError,
    addrs: ConnAddrs,
}

impl AsyncRead for H2Stream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Err(e)) = &polled {
            this.read_error
                .record(errors::io_error(&this.addrs, e, false));
        }
        polled
    }
}

impl AsyncWrite for H2Stream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http1_request_is_laid_out_as_go_writes_it() {
        let head = b"POST /v?timeout=10s HTTP/1.1\r\nHost: w.ns.svc:443\r\nUser-Agent: kube-apiserver-admission\r\n";
        let encoded = |body: &[u8], auth: &HeaderMap| {
            let mut out = Vec::new();
            encode_h1(&mut out, head, body, auth);
            out
        };
        let plain = encoded(b"{}", &HeaderMap::new());
        assert_eq!(
            String::from_utf8(plain).unwrap(),
            "POST /v?timeout=10s HTTP/1.1\r\nHost: w.ns.svc:443\r\nUser-Agent: kube-apiserver-admission\r\n\
             Content-Length: 2\r\nAccept: application/json, */*\r\nContent-Type: application/json\r\n\
             Accept-Encoding: gzip\r\n\r\n{}"
        );

        let creds = Credentials {
            bearer_token: Some("t0k".into()),
            impersonate: Some(super::super::Impersonation {
                user: "alice".into(),
                uid: None,
                groups: vec!["g2".into(), "g1".into()],
                extra: [("scopes".to_string(), vec!["a".to_string()])].into(),
            }),
            ..Credentials::default()
        };
        let auth = auth_headers(&creds).unwrap();
        let with_auth = String::from_utf8(encoded(&[b'x'; 1234], &auth)).unwrap();
        let fields: Vec<&str> = with_auth.split("\r\n").skip(3).take(7).collect();
        assert_eq!(
            fields,
            [
                "Content-Length: 1234",
                "Accept: application/json, */*",
                "Authorization: Bearer t0k",
                "Content-Type: application/json",
                "Impersonate-Extra-Scopes: a",
                "Impersonate-Group: g2",
                "Impersonate-Group: g1",
            ]
        );
        assert!(with_auth.ends_with(&format!(
            "Impersonate-User: alice\r\nAccept-Encoding: gzip\r\n\r\n{}",
            "x".repeat(1234)
        )));
    }

    #[test]
    fn gzip_answers_decode_as_go_decodes_them() {
        use std::io::Write as _;
        let gz = |data: &[u8]| {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        };
        let one = gz(b"{\"a\":1}");
        assert_eq!(gunzip(&one, 100).unwrap(), b"{\"a\":1}");
        // Members follow one another (a multistream); an empty body is an empty answer.
        let two = [one.clone(), gz(b"x")].concat();
        assert_eq!(gunzip(&two, 100).unwrap(), b"{\"a\":1}x");
        assert_eq!(gunzip(b"", 100).unwrap(), b"");
        let cause = |data: &[u8]| gunzip(data, 100).unwrap_err().detail;
        let said = |c: &str| errors::body_error(c);
        assert_eq!(cause(b"{\"not\": \"gzip\"}"), said("gzip: invalid header"));
        assert_eq!(cause(&one[..5]), said("unexpected EOF"));
        assert_eq!(cause(&one[..one.len() - 12]), said("unexpected EOF"));
        assert_eq!(
            cause(&[one.as_slice(), b"\n"].concat()),
            said("unexpected EOF")
        );
        assert_eq!(
            cause(&[one.as_slice(), b"garbage after"].concat()),
            said("gzip: invalid header")
        );
        let mut crc = one.clone();
        let n = crc.len();
        crc[n - 6] ^= 0xff;
        assert_eq!(cause(&crc), said("gzip: invalid checksum"));
        assert_eq!(
            gunzip(&gz(&[b' '; 101]), 100).unwrap_err().kind,
            TransportErrorKind::Other
        );
        assert_eq!(gunzip(&gz(&[b' '; 100]), 100).unwrap().len(), 100);
    }

    #[test]
    fn header_names_are_canonicalised_like_go() {
        assert_eq!(
            canonical_header("impersonate-extra-scopes"),
            "Impersonate-Extra-Scopes"
        );
        assert_eq!(canonical_header("www-authenticate"), "Www-Authenticate");
        assert_eq!(canonical_header("x--y"), "X--Y");
    }
}

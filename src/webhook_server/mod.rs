//! An in-process admission webhook server: real HTTPS on loopback with a CA minted at start,
//! answering AdmissionReviews by URL path with configurable [`Behaviour`]s.
//!
//! It serves benchmarks (the server is measured alongside the client, so it parses only what it
//! needs and renders fixed answers once) and demos (nothing is written to disk). HTTP/1.1 and
//! HTTP/2 are both offered through ALPN; connections are kept alive.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use hookscope::webhook_server::{Behaviour, Behaviours, Pki, ServerOptions, WebhookServer};
//!
//! let pki = Pki::mint(&["webhook.default.svc"])?;
//! let behaviours = Behaviours::new()
//!     .route("/allow", Behaviour::Allow)
//!     .route("/deny", Behaviour::deny(403, "no"));
//! let server = WebhookServer::start(&pki, behaviours, ServerOptions::default()).await?;
//! println!("caBundle for {}:\n{}", server.url("/allow"), pki.ca_pem());
//! # Ok(()) }
//! ```

mod behaviour;
mod pki;
pub(crate) mod serve;

pub(crate) use serve::accept_each;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;

pub use behaviour::{Answer, Behaviour, Behaviours, CustomFn, Review};
pub use pki::{LOOPBACK_NAMES, Pki, PkiError};

use serve::Shared;

/// Starting the server failed.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The address is not a loopback address and [`ServerOptions::allow_non_loopback`] is off.
    #[error("refusing to listen on {0}: not a loopback address (allow it explicitly)")]
    NotLoopback(SocketAddr),
    /// Binding the listener failed.
    #[error("listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The cause.
        source: io::Error,
    },
    /// The TLS configuration was refused (bad certificate or key).
    #[error("tls: {0}")]
    Tls(#[from] rustls::Error),
    /// The server's own runtime or thread could not be created.
    #[error("starting the server runtime: {0}")]
    Runtime(io::Error),
}

/// How the server listens.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Address to bind; port 0 picks a free port. Default `127.0.0.1:0`.
    pub listen: SocketAddr,
    /// Permit a non-loopback [`listen`](Self::listen) address. Off by default: the server answers
    /// anything that connects, so it should not be reachable from elsewhere by accident.
    pub allow_non_loopback: bool,
    /// Offer HTTP/2 through ALPN (HTTP/1.1 is always offered). Default on.
    pub http2: bool,
    /// Largest request body read; larger ones are answered 400. Default 32 MiB.
    pub max_body_bytes: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            allow_non_loopback: false,
            http2: true,
            max_body_bytes: 32 * 1024 * 1024,
        }
    }
}

/// A running webhook server. It stops when dropped (or on [`WebhookServer::stop`]).
pub struct WebhookServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    runner: Runner,
}

enum Runner {
    /// On the caller's runtime.
    Task(tokio::task::AbortHandle),
    /// On a thread of its own.
    Thread {
        stop: Option<oneshot::Sender<()>>,
        thread: Option<JoinHandle<()>>,
    },
}

/// A bound listener, its address, the TLS acceptor and the shared state.
struct Prepared {
    listener: std::net::TcpListener,
    addr: SocketAddr,
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
}

impl Prepared {
    /// The accept loop (registering the listener needs a runtime context).
    fn into_accept_loop(self) -> Result<impl Future<Output = ()> + use<>, ServerError> {
        let addr = self.addr;
        let listener = tokio::net::TcpListener::from_std(self.listener)
            .map_err(|source| ServerError::Bind { addr, source })?;
        Ok(serve::accept_loop(listener, self.acceptor, self.shared))
    }
}

/// Binds the listener and builds the TLS acceptor: the parts of starting that can fail.
fn prepare(
    pki: &Pki,
    behaviours: &Behaviours,
    opts: &ServerOptions,
) -> Result<Prepared, ServerError> {
    if !opts.allow_non_loopback && !opts.listen.ip().to_canonical().is_loopback() {
        return Err(ServerError::NotLoopback(opts.listen));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(pki.server_chain(), pki.server_key())?;
    config.alpn_protocols = if opts.http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    let bind_error = |source| ServerError::Bind {
        addr: opts.listen,
        source,
    };
    let listener = std::net::TcpListener::bind(opts.listen).map_err(bind_error)?;
    listener.set_nonblocking(true).map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    Ok(Prepared {
        listener,
        addr,
        acceptor: TlsAcceptor::from(Arc::new(config)),
        shared: Arc::new(Shared::new(behaviours, opts.max_body_bytes)),
    })
}

impl WebhookServer {
    /// Starts serving on the current tokio runtime (call from inside one). The listener is bound
    /// before this returns.
    pub async fn start(
        pki: &Pki,
        behaviours: Behaviours,
        opts: ServerOptions,
    ) -> Result<WebhookServer, ServerError> {
        let prepared = prepare(pki, &behaviours, &opts)?;
        let (addr, shared) = (prepared.addr, prepared.shared.clone());
        let task = tokio::spawn(prepared.into_accept_loop()?);
        Ok(WebhookServer {
            addr,
            shared,
            runner: Runner::Task(task.abort_handle()),
        })
    }

    /// Starts serving on a thread of its own with a tokio runtime of `worker_threads` threads
    /// (1: a current-thread runtime), for callers without a runtime (benchmarks, command-line
    /// tools). The listener is bound before this returns.
    pub fn start_on_thread(
        pki: &Pki,
        behaviours: Behaviours,
        opts: ServerOptions,
        worker_threads: usize,
    ) -> Result<WebhookServer, ServerError> {
        let prepared = prepare(pki, &behaviours, &opts)?;
        let (addr, shared) = (prepared.addr, prepared.shared.clone());
        let runtime = if worker_threads <= 1 {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(worker_threads)
                .thread_stack_size(crate::json::STACK_BYTES)
                .enable_all()
                .build()
        }
        .map_err(ServerError::Runtime)?;
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("webhook-server".into())
            .stack_size(crate::json::STACK_BYTES)
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(serving) = prepared.into_accept_loop() else {
                        return;
                    };
                    tokio::select! {
                        _ = serving => {}
                        _ = stop_rx => {}
                    }
                });
                runtime.shutdown_background();
            })
            .map_err(ServerError::Runtime)?;
        Ok(WebhookServer {
            addr,
            shared,
            runner: Runner::Thread {
                stop: Some(stop_tx),
                thread: Some(thread),
            },
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `https://<addr><path>`, e.g. `https://127.0.0.1:40123/allow` (IPv6 in brackets).
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// Requests received on `path` so far (0 for a path without a behaviour).
    pub fn requests_to(&self, path: &str) -> u64 {
        self.shared
            .routes
            .iter()
            .find(|r| r.path == path)
            .map_or(0, |r| r.count.load(Ordering::Relaxed))
    }

    /// Requests received so far per configured path, in the order the paths were given.
    pub fn request_counts(&self) -> Vec<(String, u64)> {
        self.shared
            .routes
            .iter()
            .map(|r| (r.path.clone(), r.count.load(Ordering::Relaxed)))
            .collect()
    }

    /// Requests received on paths without a behaviour (answered 404).
    pub fn unrouted_requests(&self) -> u64 {
        self.shared.unrouted.load(Ordering::Relaxed)
    }

    /// Every request received so far.
    pub fn total_requests(&self) -> u64 {
        self.request_counts().iter().map(|(_, n)| n).sum::<u64>() + self.unrouted_requests()
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// TLS handshakes completed so far.
    pub fn handshakes(&self) -> u64 {
        self.shared.handshakes.load(Ordering::Relaxed)
    }

    /// Connections on which HTTP/2 was negotiated so far.
    pub fn http2_connections(&self) -> u64 {
        self.shared.http2_connections.load(Ordering::Relaxed)
    }

    /// Stops serving: closes the listener and every connection.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        match &mut self.runner {
            Runner::Task(task) => task.abort(),
            Runner::Thread { stop, thread } => {
                if let Some(stop) = stop.take() {
                    let _ = stop.send(());
                }
                if let Some(thread) = thread.take() {
                    let _ = thread.join();
                }
            }
        }
    }
}

impl std::fmt::Debug for WebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookServer")
            .field("addr", &self.addr)
            .field("requests", &self.request_counts())
            .finish_non_exhaustive()
    }
}

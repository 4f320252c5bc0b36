//! Accepting connections and answering requests.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::behaviour::{Behaviours, Prepared};

/// One path's behaviour and how often it was asked.
pub(crate) struct Route {
    pub(crate) path: String,
    pub(crate) prepared: Prepared,
    pub(crate) count: AtomicU64,
}

/// State shared by the accept loop, the connections and the [`super::WebhookServer`] handle.
pub(crate) struct Shared {
    pub(crate) routes: Vec<Route>,
    index: HashMap<String, usize>,
    pub(crate) unrouted: AtomicU64,
    pub(crate) connections: AtomicU64,
    pub(crate) handshakes: AtomicU64,
    pub(crate) http2_connections: AtomicU64,
    max_body_bytes: usize,
}

impl Shared {
    pub(crate) fn new(behaviours: &Behaviours, max_body_bytes: usize) -> Shared {
        let routes: Vec<Route> = behaviours
            .routes
            .iter()
            .map(|(path, b)| Route {
                path: path.clone(),
                prepared: Prepared::new(b),
                count: AtomicU64::new(0),
            })
            .collect();
        let index = routes
            .iter()
            .enumerate()
            .map(|(i, r)| (r.path.clone(), i))
            .collect();
        Shared {
            routes,
            index,
            unrouted: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            handshakes: AtomicU64::new(0),
            http2_connections: AtomicU64::new(0),
            max_body_bytes,
        }
    }

    fn route(&self, path: &str) -> Option<&Route> {
        self.index.get(path).map(|&i| &self.routes[i])
    }
}

/// Accepts connections until the task is aborted (or the runtime shuts down); aborting it also
/// aborts every connection it spawned.
pub(crate) async fn accept_loop(listener: TcpListener, acceptor: TlsAcceptor, shared: Arc<Shared>) {
    accept_each(listener, |tcp| {
        shared.connections.fetch_add(1, Ordering::Relaxed);
        connection(tcp, acceptor.clone(), shared.clone())
    })
    .await
}

/// Runs `serve` on every accepted connection, each as its own task, until the caller's task is
/// aborted; aborting it also aborts every connection it spawned.
pub(crate) async fn accept_each<F, Fut>(listener: TcpListener, mut serve: F)
where
    F: FnMut(tokio::net::TcpStream) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else { continue };
                connections.spawn(serve(tcp));
            }
            // Reap finished connections so the set does not grow without bound.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn connection(tcp: tokio::net::TcpStream, acceptor: TlsAcceptor, shared: Arc<Shared>) {
    let _ = tcp.set_nodelay(true);
    let Ok(tls) = acceptor.accept(tcp).await else {
        return;
    };
    shared.handshakes.fetch_add(1, Ordering::Relaxed);
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    if h2 {
        shared.http2_connections.fetch_add(1, Ordering::Relaxed);
    }
    let io = TokioIo::new(tls);
    let service = service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(handle(req, &shared).await) }
    });
    if h2 {
        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(io, service)
            .await;
    } else {
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(io, service)
            .await;
    }
}

fn respond(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn text(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    respond(
        status,
        "text/plain; charset=utf-8",
        format!("{message}\n").into_bytes(),
    )
}

async fn handle(req: Request<Incoming>, shared: &Shared) -> Response<Full<Bytes>> {
    let Some(route) = shared.route(req.uri().path()) else {
        shared.unrouted.fetch_add(1, Ordering::Relaxed);
        return text(StatusCode::NOT_FOUND, "404 page not found");
    };
    route.count.fetch_add(1, Ordering::Relaxed);
    let body = match Limited::new(req.into_body(), shared.max_body_bytes)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) => return text(StatusCode::BAD_REQUEST, &format!("reading body: {e}")),
    };
    if let Some(delay) = route.prepared.delay() {
        tokio::time::sleep(delay).await;
    }
    match route.prepared.answer(&route.path, &body) {
        Ok(answer) => respond(StatusCode::OK, "application/json", answer),
        Err(e) => text(StatusCode::BAD_REQUEST, &e.to_string()),
    }
}

//! Connections and the HTTP handlers.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use futures::StreamExt as _;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;

use super::store::{Subscriber, Write, bookmark, watch_line};
use super::{Denial, FakeResource, RecordedRequest, Shared, USER, WatchExpiry, lock};

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Upstream's default `--min-request-timeout` is 1800 s; watches without `timeoutSeconds` last
/// about that long.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);
const MAX_BODY: usize = 3 * 1024 * 1024;

/// A listener on `addr` that may rebind right after a previous one on the same port closed.
pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    reserve(addr)?.listen(BACKLOG)
}

/// Connections waiting to be accepted, at most.
pub(crate) const BACKLOG: u32 = 128;

/// A socket bound to `addr` (address reuse allowed, as connections of the previous listener may
/// linger) but not listening: connections to it are refused, and binds to an ephemeral port are
/// not handed this one.
pub(crate) fn reserve(addr: SocketAddr) -> std::io::Result<TcpSocket> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    Ok(socket)
}

/// Accepts connections until aborted; aborting also aborts every connection it spawned.
pub(crate) async fn accept_loop(listener: TcpListener, acceptor: TlsAcceptor, shared: Arc<Shared>) {
    crate::webhook_server::accept_each(listener, |tcp| {
        connection(tcp, acceptor.clone(), shared.clone())
    })
    .await
}

/// One connection: TLS, then HTTP/1.1 (what kube-client speaks).
async fn connection(tcp: tokio::net::TcpStream, acceptor: TlsAcceptor, shared: Arc<Shared>) {
    let _ = tcp.set_nodelay(true);
    let Ok(tls) = acceptor.accept(tcp).await else {
        return;
    };
    let service = service_fn(move |req| {
        let shared = shared.clone();
        async move {
            // A stopped server may still have connections whose tasks are not cancelled yet;
            // failing the service makes hyper drop them as a dead server would.
            if !shared.running.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(std::io::Error::other("the fake API server is stopped"));
            }
            Ok(handle(req, &shared).await)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(tls), service)
        .await;
}

fn full(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed_unsync());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    full(
        status,
        "application/json",
        serde_json::to_vec(value).unwrap_or_default(),
    )
}

/// A `metav1.Status` failure.
fn status_value(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if let Some(details) = details {
        status["details"] = details;
    }
    status
}

fn status(code: StatusCode, reason: &str, message: &str, details: Option<Value>) -> Response<Body> {
    json_response(code, &status_value(code.as_u16(), reason, message, details))
}

fn qualified(resource: FakeResource) -> String {
    match resource.group() {
        "" => resource.plural().to_string(),
        group => format!("{}.{group}", resource.plural()),
    }
}

fn forbidden_resource(resource: FakeResource, verb: &str, name: Option<&str>) -> Response<Body> {
    forbidden_in(resource, verb, name, None)
}

/// The 403 of `verb` on `resource`, in `namespace` when the request named one (upstream's
/// `forbiddenMessage`: "in the namespace …" rather than "at the cluster scope").
fn forbidden_in(
    resource: FakeResource,
    verb: &str,
    name: Option<&str>,
    namespace: Option<&str>,
) -> Response<Body> {
    let subject = match name {
        Some(name) => format!("{} {name:?}", qualified(resource)),
        None => qualified(resource),
    };
    let scope = match namespace {
        Some(ns) => format!("in the namespace {ns:?}"),
        None => "at the cluster scope".to_string(),
    };
    let message = format!(
        "{subject} is forbidden: User {USER:?} cannot {verb} resource {:?} in API group {:?} {scope}",
        resource.plural(),
        resource.group()
    );
    let mut details = json!({"group": resource.group(), "kind": resource.plural()});
    if let Some(name) = name {
        details["name"] = json!(name);
    }
    status(StatusCode::FORBIDDEN, "Forbidden", &message, Some(details))
}

fn not_found(resource: FakeResource, name: &str) -> Response<Body> {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("{} {name:?} not found", qualified(resource)),
        Some(json!({"name": name, "group": resource.group(), "kind": resource.plural()})),
    )
}

fn expired(message: &str) -> Response<Body> {
    status(StatusCode::GONE, "Expired", message, None)
}

/// Decoded `key=value` pairs of a query string.
pub(crate) fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes
            .get(i + 1..i + 3)
            .filter(|_| bytes[i] == b'%')
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (bytes[i], escaped) {
            (_, Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', None) => {
                out.push(b' ');
                i += 1;
            }
            (b, None) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

struct Params(Vec<(String, String)>);

impl Params {
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some("true" | "1"))
    }
}

fn denied(shared: &Shared, denial: &Denial) -> bool {
    lock(&shared.denials).contains(denial)
}

async fn handle(req: Request<Incoming>, shared: &Shared) -> Response<Body> {
    let recorded = RecordedRequest {
        method: req.method().to_string(),
        path: req.uri().path().to_string(),
        query: req.uri().query().unwrap_or("").to_string(),
        accept: req
            .headers()
            .get(http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    };
    lock(&shared.requests).push(recorded.clone());

    let expected = format!("Bearer {}", lock(&shared.token));
    let authorised = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == expected);
    if !authorised {
        return status(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "Unauthorized",
            None,
        );
    }

    let params = Params(query_pairs(&recorded.query));
    let path = recorded.path.as_str();
    match (req.method(), path) {
        (&Method::GET, "/version") => version(shared),
        (&Method::GET, "/metrics") => {
            if denied(shared, &Denial::Path("/metrics".into())) {
                let message = format!("forbidden: User {USER:?} cannot get path \"/metrics\"");
                return status(
                    StatusCode::FORBIDDEN,
                    "Forbidden",
                    &message,
                    Some(json!({})),
                );
            }
            let text = lock(&shared.metrics).clone();
            full(
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                text.into_bytes(),
            )
        }
        (&Method::GET, "/apis") => group_list(shared),
        (&Method::GET, "/api/v1") => core_resources(),
        (&Method::GET, p) if p.strip_prefix(GROUP_PATH) == Some("") => {
            json_response(StatusCode::OK, &group(shared))
        }
        (&Method::GET, p)
            if p.strip_prefix(GROUP_PATH)
                .and_then(|v| v.strip_prefix('/'))
                .is_some_and(|v| !v.contains('/')) =>
        {
            resource_list(shared, &p[GROUP_PATH.len() + 1..])
        }
        _ => {
            // `…/namespaces/NS/PLURAL[/NAME]`: a namespaced resource, seen in one namespace.
            let (path, namespace) = split_namespace(path);
            let Some((resource, version, rest)) = FakeResource::from_path(&path) else {
                return page_not_found();
            };
            if namespace.is_some() && !resource.namespaced() {
                return page_not_found();
            }
            let selection = Selection::new(namespace.clone(), &params);
            // A resource at a version not served is not there at all.
            if !lock(&shared.served)
                .get(&resource)
                .is_some_and(|vs| vs.iter().any(|v| v == version))
            {
                return page_not_found();
            }
            let version = version.to_string();
            let name = match rest.strip_prefix('/') {
                None | Some("") => None,
                Some(name) if !name.contains('/') => Some(match &namespace {
                    Some(ns) => format!("{ns}/{name}"),
                    None => name.to_string(),
                }),
                Some(_) => return page_not_found(),
            };
            let name = name.as_deref();
            match (req.method().clone(), name) {
                (Method::GET, None) if params.flag("watch") => {
                    watch(shared, resource, &params, selection)
                }
                (Method::GET, None) => list(shared, resource, &version, &params, &selection),
                (Method::GET, Some(name)) => get(shared, resource, name),
                (Method::PATCH, Some(name)) => {
                    let name = name.to_string();
                    apply(req, shared, (resource, &version), &name, &params).await
                }
                (method, _) => status(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "MethodNotAllowed",
                    &format!(
                        "the server does not allow this method on the requested resource ({method} is not served by this fake)"
                    ),
                    Some(json!({})),
                ),
            }
        }
    }
}

/// `path` without its `/namespaces/NS` segment, and `NS`, when it names a namespaced collection
/// or object (`/api/v1/namespaces/NS/endpoints`, `/apis/G/V/namespaces/NS/PLURAL/NAME`); else the
/// path as it is (`/api/v1/namespaces/NAME` is a Namespace).
fn split_namespace(path: &str) -> (String, Option<String>) {
    let parts: Vec<&str> = path.split('/').collect();
    // ["", "api", "v1", "namespaces", NS, PLURAL, …] or ["", "apis", G, V, "namespaces", NS, PLURAL, …]
    let at = match parts.get(1) {
        Some(&"api") => 3,
        Some(&"apis") => 4,
        _ => return (path.to_string(), None),
    };
    if parts.len() > at + 2 && parts[at] == "namespaces" && !parts[at + 1].is_empty() {
        let mut kept: Vec<&str> = parts[..at].to_vec();
        kept.extend(&parts[at + 2..]);
        return (kept.join("/"), Some(parts[at + 1].to_string()));
    }
    (path.to_string(), None)
}

/// Which objects a list or watch returns: those of one namespace, with the labels of an
/// equality-based `labelSelector` (`a=b,c=d`), and the name of a `fieldSelector`
/// (`metadata.name=N`), the selectors kube's watcher sends.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selection {
    namespace: Option<String>,
    labels: Vec<(String, String)>,
    name: Option<String>,
}

impl Selection {
    fn new(namespace: Option<String>, params: &Params) -> Selection {
        let pairs = |text: Option<&str>| -> Vec<(String, String)> {
            text.unwrap_or("")
                .split(',')
                .filter_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    Some((k.trim_end_matches('=').to_string(), v.to_string()))
                })
                .collect()
        };
        let name = pairs(params.get("fieldSelector"))
            .into_iter()
            .find(|(k, _)| k == "metadata.name")
            .map(|(_, v)| v);
        Selection {
            namespace,
            labels: pairs(params.get("labelSelector")),
            name,
        }
    }

    /// Whether `object` is selected.
    pub(crate) fn matches(&self, object: &Value) -> bool {
        let metadata = &object["metadata"];
        self.namespace
            .as_deref()
            .is_none_or(|ns| metadata["namespace"].as_str() == Some(ns))
            && self
                .name
                .as_deref()
                .is_none_or(|n| metadata["name"].as_str() == Some(n))
            && self
                .labels
                .iter()
                .all(|(k, v)| metadata["labels"][k].as_str() == Some(v))
    }
}

/// The discovery path of `admissionregistration.k8s.io`.
const GROUP_PATH: &str = "/apis/admissionregistration.k8s.io";

/// `apiVersion` of `resource`'s objects at `version`.
fn api_version_at(resource: FakeResource, version: &str) -> String {
    match resource.group() {
        "" => version.to_string(),
        group => format!("{group}/{version}"),
    }
}

/// The versions of `admissionregistration.k8s.io` served, most preferred first (as the
/// apiserver orders them: stable, beta, alpha).
fn group_versions(shared: &Shared) -> Vec<String> {
    let served = lock(&shared.served);
    let mut versions: Vec<String> = Vec::new();
    for version in ["v1", "v1beta1", "v1alpha1"] {
        let any = served
            .iter()
            .any(|(r, vs)| r.admission() && vs.iter().any(|v| v == version));
        if any {
            versions.push(version.to_string());
        }
    }
    versions
}

/// The `APIGroup` of `admissionregistration.k8s.io`.
fn group(shared: &Shared) -> Value {
    let group = super::API_VERSION.split('/').next().unwrap_or_default();
    let versions: Vec<Value> = group_versions(shared)
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": versions,
        "preferredVersion": versions.first().cloned().unwrap_or(json!(null)),
    })
}

/// `GET /apis`: the `APIGroupList` (the one group this server has).
fn group_list(shared: &Shared) -> Response<Body> {
    let mut group = group(shared);
    if let Some(map) = group.as_object_mut() {
        map.remove("kind");
        map.remove("apiVersion");
    }
    json_response(
        StatusCode::OK,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]}),
    )
}

/// `GET /api/v1`: the core resources this server has.
fn core_resources() -> Response<Body> {
    let resources: Vec<Value> = [
        FakeResource::Namespaces,
        FakeResource::ConfigMaps,
        FakeResource::Endpoints,
    ]
    .into_iter()
    .map(|r| {
        json!({
        "name": r.plural(),
        "singularName": r.kind().to_lowercase(),
        "namespaced": r.namespaced(),
            "kind": r.kind(),
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        })
    })
    .collect();
    json_response(
        StatusCode::OK,
        &json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": resources}),
    )
}

/// `GET /apis/admissionregistration.k8s.io/VERSION`: the resources served at `version`.
fn resource_list(shared: &Shared, version: &str) -> Response<Body> {
    let served = lock(&shared.served);
    let resources: Vec<Value> = served
        .iter()
        .filter(|(r, vs)| r.admission() && vs.iter().any(|v| v == version))
        .map(|(r, _)| {
            json!({
                "name": r.plural(),
                "singularName": r.kind().to_lowercase(),
                "namespaced": false,
                "kind": r.kind(),
                "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
            })
        })
        .collect();
    if resources.is_empty() {
        return page_not_found();
    }
    json_response(
        StatusCode::OK,
        &json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("admissionregistration.k8s.io/{version}"),
            "resources": resources,
        }),
    )
}

fn page_not_found() -> Response<Body> {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
        Some(json!({})),
    )
}

fn version(shared: &Shared) -> Response<Body> {
    let git_version = lock(&shared.git_version).clone();
    let mut numbers = git_version.trim_start_matches('v').split(['.', '-', '+']);
    let major = numbers.next().unwrap_or("").to_string();
    let minor = numbers.next().unwrap_or("").to_string();
    json_response(
        StatusCode::OK,
        &json!({
            "major": major,
            "minor": minor,
            "gitVersion": git_version,
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2025-01-01T00:00:00Z",
            "goVersion": "go1.24.0",
            "compiler": "gc",
            "platform": "linux/amd64",
        }),
    )
}

fn get(shared: &Shared, resource: FakeResource, name: &str) -> Response<Body> {
    if denied(shared, &Denial::resource(resource, "get")) {
        return forbidden_resource(resource, "get", Some(name));
    }
    let store = lock(&shared.store);
    match store.objects.get(&(resource, name.to_string())) {
        Some(object) => json_response(StatusCode::OK, object),
        None => not_found(resource, name),
    }
}

fn continue_token(resource_version: u64, start: &str) -> String {
    let token =
        json!({"v": "meta.k8s.io/v1", "rv": resource_version, "start": format!("{start}\u{0}")});
    base64::engine::general_purpose::URL_SAFE.encode(serde_json::to_vec(&token).unwrap_or_default())
}

fn decode_continue(token: &str) -> Option<(u64, String)> {
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .ok()?;
    let value: Value = crate::json::from_slice(&bytes).ok()?;
    Some((value["rv"].as_u64()?, value["start"].as_str()?.to_string()))
}

fn list(
    shared: &Shared,
    resource: FakeResource,
    version: &str,
    params: &Params,
    selection: &Selection,
) -> Response<Body> {
    if denied(shared, &Denial::resource(resource, "list")) {
        // A `fieldSelector=metadata.name=…` names the object, which RBAC and its message see.
        return forbidden_in(
            resource,
            "list",
            selection.name.as_deref(),
            selection.namespace.as_deref(),
        );
    }
    let store = lock(&shared.store);
    let limit = params
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|&l| l > 0);
    let (list_rv, start) = match params.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            let Some((rv, start)) = decode_continue(token) else {
                return status(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
                    None,
                );
            };
            if rv < store.oldest_watchable {
                return expired(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                );
            }
            (rv, start)
        }
        None => {
            if params.get("resourceVersionMatch") == Some("Exact")
                && let Some(rv) = params
                    .get("resourceVersion")
                    .and_then(|r| r.parse::<u64>().ok())
                && rv < store.oldest_watchable
            {
                return expired(&format!(
                    "too old resource version: {rv} ({})",
                    store.oldest_watchable
                ));
            }
            (store.resource_version, String::new())
        }
    };
    let all: Vec<&Value> = store
        .list(resource)
        .into_iter()
        .filter(|o| selection.matches(o))
        .filter(|o| o["metadata"]["name"].as_str().unwrap_or("") >= start.as_str())
        .collect();
    let take = limit.unwrap_or(all.len()).min(all.len());
    let items: Vec<Value> = all[..take]
        .iter()
        .map(|o| {
            let mut item = (*o).clone();
            if let Some(map) = item.as_object_mut() {
                map.remove("kind");
                map.remove("apiVersion");
            }
            item
        })
        .collect();
    let mut metadata = json!({"resourceVersion": list_rv.to_string()});
    if take < all.len()
        && let Some(last) = items.last().and_then(|o| o["metadata"]["name"].as_str())
    {
        metadata["continue"] = json!(continue_token(list_rv, last));
        metadata["remainingItemCount"] = json!(all.len() - take);
    }
    json_response(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", resource.kind()),
            "apiVersion": api_version_at(resource, version),
            "metadata": metadata,
            "items": items,
        }),
    )
}

fn watch(
    shared: &Shared,
    resource: FakeResource,
    params: &Params,
    selection: Selection,
) -> Response<Body> {
    if denied(shared, &Denial::resource(resource, "watch")) {
        return forbidden_in(
            resource,
            "watch",
            selection.name.as_deref(),
            selection.namespace.as_deref(),
        );
    }
    let bookmarks = params.flag("allowWatchBookmarks");
    let initial_events = params.flag("sendInitialEvents");
    let timeout = params
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_WATCH_TIMEOUT);
    let requested = params.get("resourceVersion").unwrap_or("");
    let (tx, rx) = mpsc::unbounded_channel();
    {
        let mut store = lock(&shared.store);
        if requested.is_empty() || requested == "0" || initial_events {
            for object in store.list(resource) {
                if !selection.matches(object) {
                    continue;
                }
                let _ = tx.send(watch_line("ADDED", object));
            }
            if initial_events && bookmarks {
                let mark = bookmark(resource, store.resource_version, true);
                let _ = tx.send(watch_line("BOOKMARK", &mark));
            }
        } else {
            let Ok(from) = requested.parse::<u64>() else {
                return status(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    &format!("invalid resource version: {requested:?}"),
                    None,
                );
            };
            if from < store.oldest_watchable {
                let message = format!(
                    "too old resource version: {from} ({})",
                    store.oldest_watchable
                );
                match *lock(&shared.expiry) {
                    WatchExpiry::HttpStatus => return expired(&message),
                    WatchExpiry::ErrorEvent => {
                        let error = status_value(410, "Expired", &message, None);
                        let _ = tx.send(watch_line("ERROR", &error));
                        drop(tx);
                        return streaming(rx, timeout);
                    }
                }
            }
            for event in store.history.iter().filter(|e| {
                e.resource == resource && e.resource_version > from && selection.matches(&e.object)
            }) {
                let _ = tx.send(watch_line(event.kind, &event.object));
            }
        }
        if !shared.running.load(std::sync::atomic::Ordering::SeqCst) {
            return streaming(rx, timeout);
        }
        store.subscribers.push(Subscriber {
            resource,
            selection,
            bookmarks,
            lines: tx,
        });
    }
    streaming(rx, timeout)
}

/// A chunked `application/json` body of watch lines, ending when the sender is dropped or the
/// watch times out.
fn streaming(rx: mpsc::UnboundedReceiver<Bytes>, timeout: Duration) -> Response<Body> {
    let deadline = tokio::time::Instant::now() + timeout;
    let lines = futures::stream::unfold(rx, move |mut rx| async move {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(line)) => Some((Ok::<_, Infallible>(Frame::data(line)), rx)),
            _ => None,
        }
    })
    .boxed();
    let mut response = Response::new(BodyExt::boxed_unsync(StreamBody::new(lines)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn merge_applied(existing: &Value, applied: &Value) -> Value {
    let mut merged = existing.clone();
    let (Some(target), Some(source)) = (merged.as_object_mut(), applied.as_object()) else {
        return applied.clone();
    };
    for (key, value) in source {
        if key != "metadata" {
            target.insert(key.clone(), value.clone());
            continue;
        }
        for sub in ["labels", "annotations"] {
            if let Some(entries) = value.get(sub).and_then(Value::as_object) {
                let meta = target.entry("metadata").or_insert_with(|| json!({}));
                let slot = &mut meta[sub];
                if !slot.is_object() {
                    *slot = json!({});
                }
                for (k, v) in entries {
                    slot[k] = v.clone();
                }
            }
        }
    }
    merged
}

async fn apply(
    req: Request<Incoming>,
    shared: &Shared,
    (resource, version): (FakeResource, &str),
    name: &str,
    params: &Params,
) -> Response<Body> {
    let api_version = api_version_at(resource, version);
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let json_patch = content_type.starts_with("application/json-patch+json");
    if !json_patch && !content_type.starts_with("application/apply-patch+yaml") {
        return status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            &format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/apply-patch+yaml (this fake serves no other patch, got {content_type:?})"
            ),
            None,
        );
    }
    if denied(shared, &Denial::resource(resource, "patch")) {
        return forbidden_resource(resource, "patch", Some(name));
    }
    let manager = match params.get("fieldManager").filter(|m| !m.is_empty()) {
        Some(m) => Some(m),
        // A patch that is not an apply is recorded under the client's name.
        None if json_patch => Some("unknown"),
        None => None,
    };
    let Some(manager) = manager else {
        return status(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            Some(
                json!({"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [{"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}]}),
            ),
        );
    };
    let manager = manager.to_string();
    let dry_run = match params.get("dryRun") {
        None => false,
        Some("All") => true,
        Some(other) => {
            return status(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                &format!("Invalid dryRun value {other:?}: only \"All\" is supported"),
                None,
            );
        }
    };
    let force = params.flag("force");
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return status(StatusCode::BAD_REQUEST, "BadRequest", &e.to_string(), None);
        }
    };
    if json_patch {
        return patch_json(shared, resource, name, &body, &manager, dry_run);
    }
    let applied: Value = match crate::json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => match std::str::from_utf8(&body)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_saphyr::from_str::<Value>(text).map_err(|e| e.to_string()))
        {
            Ok(v) => v,
            Err(e) => {
                return status(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    &format!("error decoding YAML: {e}"),
                    None,
                );
            }
        },
    };
    if !applied.is_object() {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "the apply patch is not an object",
            None,
        );
    }
    if applied["kind"] != resource.kind() || applied["apiVersion"] != api_version.as_str() {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            &format!(
                "the apply patch must have apiVersion {api_version} and kind {}",
                resource.kind()
            ),
            None,
        );
    }
    if let Some(body_name) = applied["metadata"]["name"].as_str()
        && body_name != name
    {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            &format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            ),
            None,
        );
    }
    if applied["metadata"]["managedFields"]
        .as_array()
        .is_some_and(|m| !m.is_empty())
    {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "metadata.managedFields must be nil",
            None,
        );
    }
    let mut applied = applied;
    applied["metadata"]["name"] = json!(name);

    let mut apply_write = Write {
        manager: &manager,
        operation: "Apply",
        dry_run,
        prepared: false,
    };
    let mut store = lock(&shared.store);
    let existing = store.objects.get(&(resource, name.to_string())).cloned();
    if let Some(result) = super::ssa::apply(existing.as_ref(), &applied, &manager, force) {
        // The field manager's apply, as the apiserver does it for a kind the model knows.
        let object = match result {
            Ok(object) => object,
            Err(e) => {
                let (code, body) = super::ssa::status_of(&e);
                let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                return json_response(code, &body);
            }
        };
        apply_write.prepared = true;
        let result = match existing {
            Some(_) => store
                .update(resource, object, apply_write)
                .map(|o| (StatusCode::OK, o)),
            None => store
                .create(resource, object, apply_write)
                .map(|o| (StatusCode::CREATED, o)),
        };
        return stored(result);
    }
    let result = match existing {
        Some(existing) => {
            let merged = merge_applied(&existing, &applied);
            if !force && merged.get("webhooks") != existing.get("webhooks") {
                let others: Vec<String> = existing["metadata"]["managedFields"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e["manager"].as_str())
                    .filter(|m| *m != manager)
                    .map(str::to_string)
                    .collect();
                if let Some(other) = others.first() {
                    let cause = format!("conflict with {other:?} using {}", resource.api_version());
                    return status(
                        StatusCode::CONFLICT,
                        "Conflict",
                        &format!("Apply failed with 1 conflict: {cause}: .webhooks"),
                        Some(
                            json!({"causes": [{"reason": "FieldManagerConflict", "message": cause, "field": ".webhooks"}]}),
                        ),
                    );
                }
            }
            store
                .update(resource, merged, apply_write)
                .map(|o| (StatusCode::OK, o))
        }
        None => store
            .create(resource, applied, apply_write)
            .map(|o| (StatusCode::CREATED, o)),
    };
    stored(result)
}

/// The answer to a write: the object stored with its code, or a 500.
fn stored(result: Result<(StatusCode, Value), super::FakeError>) -> Response<Body> {
    match result {
        Ok((code, object)) => json_response(code, &object),
        Err(e) => status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            &e.to_string(),
            None,
        ),
    }
}

/// A JSON patch of a stored object, recorded as an update by `manager`: 404 when there is no
/// object, 422 when the patch does not apply (a failed `test`, a missing path).
fn patch_json(
    shared: &Shared,
    resource: FakeResource,
    name: &str,
    body: &[u8],
    manager: &str,
    dry_run: bool,
) -> Response<Body> {
    let mut store = lock(&shared.store);
    let Some(existing) = store.objects.get(&(resource, name.to_string())).cloned() else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!("{} {name:?} not found", qualified(resource)),
            Some(json!({"name": name, "group": resource.group(), "kind": resource.plural()})),
        );
    };
    let patched = match super::ssa::json_patch(&existing, body) {
        Ok(v) => v,
        // The apiserver answers a patch that does not apply (whatever the reason) so.
        Err(_) => {
            return status(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                "the server rejected our request due to an error in our request",
                Some(json!({})),
            );
        }
    };
    let write = Write {
        manager,
        operation: "Update",
        dry_run,
        prepared: false,
    };
    match store.update(resource, patched, write) {
        Ok(object) => json_response(StatusCode::OK, &object),
        Err(e) => status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            &e.to_string(),
            None,
        ),
    }
}

//! A Kubernetes API server on loopback that speaks the real wire protocol, for tests, benchmarks
//! and demos.
//!
//! It serves `admissionregistration.k8s.io/v1` `mutatingwebhookconfigurations` and
//! `validatingwebhookconfigurations`, the admission policies and their bindings in the versions
//! [`FakeApiServer::serve_versions`] sets (by default as kube-apiserver 1.33 serves them without
//! flags: the validating kinds as `v1`, the mutating kinds not at all), and core `v1`
//! `namespaces` (all cluster-scoped; a Namespace gets the `kubernetes.io/metadata.name` label the
//! apiserver sets), core `v1` `configmaps` and `apiextensions.k8s.io/v1`
//! `customresourcedefinitions` over TLS with a freshly minted CA, and answers as kube-apiserver does:
//!
//! * discovery: `GET /apis` (the `APIGroupList`, with `admissionregistration.k8s.io` and the
//!   versions served) and `GET /apis/admissionregistration.k8s.io/VERSION` (its
//!   `APIResourceList`); a resource at a version not served is a 404;
//! * LIST (`kind: …List`, `metadata.resourceVersion`, `limit`/`continue` paging), GET by name;
//! * WATCH (`?watch=true&resourceVersion=…&allowWatchBookmarks=true&timeoutSeconds=…`, and
//!   `sendInitialEvents=true` streaming lists) as newline-delimited `metav1.WatchEvent`s
//!   (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`);
//! * `410 Gone` for a too-old resourceVersion: by default an `ERROR` watch event carrying a
//!   `Status` with code 410 and reason `Expired` (what the watch cache sends), or, with
//!   [`WatchExpiry::HttpStatus`], an HTTP 410 response; an expired `continue` token is always
//!   an HTTP 410;
//! * `401 Unauthorized` without the bearer token, `403 Forbidden` where [`FakeApiServer::forbid`]
//!   says so, with upstream's `Status` bodies and messages;
//! * server-side apply (`PATCH`, `application/apply-patch+yaml`, `fieldManager`, `force`,
//!   `dryRun=All`) and JSON patches (`application/json-patch+json`), with `managedFields` and
//!   conflicts as the apiserver's field manager records and reports them (hookscope's model of
//!   it, [`crate::apply`], for the kinds its schema knows; test-side writes are recorded the
//!   same way);
//! * `GET /metrics` (a settable text) and `GET /version` (a settable `gitVersion`).
//!
//! Test-side writes ([`FakeApiServer::create`], [`FakeApiServer::update`],
//! [`FakeApiServer::delete`]) bump the global resourceVersion, record `managedFields` and notify
//! open watches. The server can be stopped and started again on the same port, keeping its
//! objects, to exercise reconnection.
//!
//! Approximations: objects are stored and served with the apiVersion they were written with (a
//! real server converts them to the version asked for; the versions of these kinds share one
//! shape); an object test-side writes create is not defaulted (one a server-side apply writes
//! is); paged lists return the current
//! objects after the token's name rather than a snapshot at the token's resourceVersion.

mod serve;
mod ssa;
mod store;

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use base64::Engine as _;
use serde_json::Value;
use tokio::task::JoinHandle;

use crate::webhook_server::{Pki, PkiError};
use store::Store;

/// `admissionregistration.k8s.io/v1`.
pub const API_VERSION: &str = "admissionregistration.k8s.io/v1";

/// The user name the fake server authenticates its bearer token as (it appears in 403 messages).
pub const USER: &str = "hookscope-test";

/// One of the resources the server stores (all cluster-scoped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FakeResource {
    /// `mutatingwebhookconfigurations`.
    MutatingWebhookConfigurations,
    /// `validatingwebhookconfigurations`.
    ValidatingWebhookConfigurations,
    /// Core `namespaces`.
    Namespaces,
    /// `validatingadmissionpolicies`.
    ValidatingAdmissionPolicies,
    /// `validatingadmissionpolicybindings`.
    ValidatingAdmissionPolicyBindings,
    /// `mutatingadmissionpolicies`.
    MutatingAdmissionPolicies,
    /// `mutatingadmissionpolicybindings`.
    MutatingAdmissionPolicyBindings,
    /// Core `configmaps` (namespaced; listed and watched across namespaces, stored by
    /// `namespace/name`), the parameters policies most often take.
    ConfigMaps,
    /// `apiextensions.k8s.io/v1` `customresourcedefinitions` (cluster-scoped).
    CustomResourceDefinitions,
    /// `discovery.k8s.io/v1` `endpointslices` (namespaced): kube-apiserver's endpoint reconciler
    /// writes those of `default/kubernetes`, one address per apiserver.
    EndpointSlices,
    /// Core `endpoints` (namespaced): the older form of the same.
    Endpoints,
}

impl FakeResource {
    /// Every resource the server knows.
    pub const ALL: [FakeResource; 11] = [
        FakeResource::MutatingWebhookConfigurations,
        FakeResource::ValidatingWebhookConfigurations,
        FakeResource::Namespaces,
        FakeResource::ValidatingAdmissionPolicies,
        FakeResource::ValidatingAdmissionPolicyBindings,
        FakeResource::MutatingAdmissionPolicies,
        FakeResource::MutatingAdmissionPolicyBindings,
        FakeResource::ConfigMaps,
        FakeResource::CustomResourceDefinitions,
        FakeResource::EndpointSlices,
        FakeResource::Endpoints,
    ];

    /// The plural resource name used in URLs and RBAC rules.
    pub fn plural(self) -> &'static str {
        match self {
            FakeResource::MutatingWebhookConfigurations => "mutatingwebhookconfigurations",
            FakeResource::ValidatingWebhookConfigurations => "validatingwebhookconfigurations",
            FakeResource::Namespaces => "namespaces",
            FakeResource::ValidatingAdmissionPolicies => "validatingadmissionpolicies",
            FakeResource::ValidatingAdmissionPolicyBindings => "validatingadmissionpolicybindings",
            FakeResource::MutatingAdmissionPolicies => "mutatingadmissionpolicies",
            FakeResource::MutatingAdmissionPolicyBindings => "mutatingadmissionpolicybindings",
            FakeResource::ConfigMaps => "configmaps",
            FakeResource::CustomResourceDefinitions => "customresourcedefinitions",
            FakeResource::EndpointSlices => "endpointslices",
            FakeResource::Endpoints => "endpoints",
        }
    }

    /// The object kind.
    pub fn kind(self) -> &'static str {
        match self {
            FakeResource::MutatingWebhookConfigurations => "MutatingWebhookConfiguration",
            FakeResource::ValidatingWebhookConfigurations => "ValidatingWebhookConfiguration",
            FakeResource::Namespaces => "Namespace",
            FakeResource::ValidatingAdmissionPolicies => "ValidatingAdmissionPolicy",
            FakeResource::ValidatingAdmissionPolicyBindings => "ValidatingAdmissionPolicyBinding",
            FakeResource::MutatingAdmissionPolicies => "MutatingAdmissionPolicy",
            FakeResource::MutatingAdmissionPolicyBindings => "MutatingAdmissionPolicyBinding",
            FakeResource::ConfigMaps => "ConfigMap",
            FakeResource::CustomResourceDefinitions => "CustomResourceDefinition",
            FakeResource::EndpointSlices => "EndpointSlice",
            FakeResource::Endpoints => "Endpoints",
        }
    }

    /// The versions served unless [`FakeApiServer::serve_versions`] says otherwise, as
    /// kube-apiserver 1.33 serves them without flags: `v1`, except the mutating policy kinds
    /// (alpha, off by default), which are not served.
    pub fn default_versions(self) -> &'static [&'static str] {
        match self {
            FakeResource::MutatingAdmissionPolicies
            | FakeResource::MutatingAdmissionPolicyBindings => &[],
            _ => &["v1"],
        }
    }

    /// The API group (empty for the core group).
    pub fn group(self) -> &'static str {
        match self {
            FakeResource::Namespaces | FakeResource::ConfigMaps | FakeResource::Endpoints => "",
            FakeResource::EndpointSlices => "discovery.k8s.io",
            FakeResource::CustomResourceDefinitions => "apiextensions.k8s.io",
            _ => "admissionregistration.k8s.io",
        }
    }

    /// The `apiVersion` of its objects.
    pub fn api_version(self) -> &'static str {
        match self.group() {
            "" => "v1",
            "apiextensions.k8s.io" => "apiextensions.k8s.io/v1",
            "discovery.k8s.io" => "discovery.k8s.io/v1",
            _ => API_VERSION,
        }
    }

    /// The path of its collection at `v1`: `/api/v1/namespaces`, `/apis/GROUP/v1/PLURAL`.
    pub fn path(self) -> String {
        self.path_at("v1")
    }

    /// The path of its collection at `version`.
    pub fn path_at(self, version: &str) -> String {
        match self.group() {
            "" => format!("/api/{version}/{}", self.plural()),
            group => format!("/apis/{group}/{version}/{}", self.plural()),
        }
    }

    /// The resource whose objects have `kind`.
    pub fn from_kind(kind: &str) -> Option<FakeResource> {
        FakeResource::ALL.into_iter().find(|r| r.kind() == kind)
    }

    /// Whether its objects live in a namespace.
    pub fn namespaced(self) -> bool {
        matches!(
            self,
            FakeResource::ConfigMaps | FakeResource::EndpointSlices | FakeResource::Endpoints
        )
    }

    /// Whether it is one of `admissionregistration.k8s.io`'s (what that group's discovery lists).
    pub(crate) fn admission(self) -> bool {
        self.group() == "admissionregistration.k8s.io"
    }

    /// The resource whose collection is at `path`, the version in the path, and the rest of the
    /// path after the collection.
    fn from_path(path: &str) -> Option<(FakeResource, &str, &str)> {
        let (group, rest) = match path.strip_prefix("/api/") {
            Some(rest) => ("", rest),
            None => {
                let rest = path.strip_prefix("/apis/")?;
                let (group, rest) = rest.split_once('/')?;
                (group, rest)
            }
        };
        let (version, rest) = rest.split_once('/')?;
        let (plural, rest) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let resource = FakeResource::ALL
            .into_iter()
            .find(|r| r.group() == group && r.plural() == plural)?;
        Some((resource, version, rest))
    }
}

impl fmt::Display for FakeResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.plural())
    }
}

/// What [`FakeApiServer::forbid`] denies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// A verb (`get`, `list`, `watch`, `patch`) on a resource.
    Resource {
        /// The resource.
        resource: FakeResource,
        /// The verb, as RBAC names it.
        verb: String,
    },
    /// `get` on a non-resource path such as `/metrics`.
    Path(String),
}

impl Denial {
    /// `verb` on `resource`.
    pub fn resource(resource: FakeResource, verb: &str) -> Denial {
        Denial::Resource {
            resource,
            verb: verb.to_string(),
        }
    }
}

/// How a watch from a resourceVersion older than the server keeps is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WatchExpiry {
    /// HTTP 200 and a single `ERROR` event with a 410 `Expired` `Status` (the watch cache's way).
    #[default]
    ErrorEvent,
    /// An HTTP 410 response with the `Status` body.
    HttpStatus,
}

/// Why a test-side operation on the fake server failed.
#[derive(Debug, thiserror::Error)]
pub enum FakeError {
    /// The object has no `metadata.name`.
    #[error("the object has no metadata.name")]
    MissingName,
    /// `kind` is not one of the kinds served.
    #[error(
        "kind {0:?} is not served (a webhook configuration, an admission policy or binding, or a Namespace)"
    )]
    UnknownKind(String),
    /// Create of an existing name.
    #[error("{resource} {name:?} already exists")]
    AlreadyExists {
        /// The resource.
        resource: FakeResource,
        /// The name.
        name: String,
    },
    /// Update or delete of a missing name.
    #[error("{resource} {name:?} not found")]
    NotFound {
        /// The resource.
        resource: FakeResource,
        /// The name.
        name: String,
    },
    /// Minting the certificates failed.
    #[error(transparent)]
    Pki(#[from] PkiError),
    /// Binding or configuring the listener failed.
    #[error("listening on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
    /// The TLS configuration could not be built.
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
}

/// One request the server received (after TLS), for tests to inspect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// `GET`, `PATCH`, …
    pub method: String,
    /// The path.
    pub path: String,
    /// The raw query string (empty when there is none).
    pub query: String,
    /// The `Accept` header, if any.
    pub accept: Option<String>,
}

impl RecordedRequest {
    /// The value of query parameter `name`, decoded.
    pub fn param(&self, name: &str) -> Option<String> {
        serve::query_pairs(&self.query)
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// Whether this is a watch request (`watch=true` or `watch=1`).
    pub fn is_watch(&self) -> bool {
        matches!(self.param("watch").as_deref(), Some("true" | "1"))
    }
}

/// Runtime-adjustable behaviour and counters, shared with the connections.
pub(crate) struct Shared {
    pub(crate) store: Mutex<Store>,
    pub(crate) token: Mutex<String>,
    pub(crate) metrics: Mutex<String>,
    pub(crate) denials: Mutex<Vec<Denial>>,
    pub(crate) expiry: Mutex<WatchExpiry>,
    pub(crate) requests: Mutex<Vec<RecordedRequest>>,
    pub(crate) git_version: Mutex<String>,
    /// The versions each resource is served in (none: not served).
    pub(crate) served: Mutex<std::collections::BTreeMap<FakeResource, Vec<String>>>,
    /// False between [`FakeApiServer::stop`] and [`FakeApiServer::restart`].
    pub(crate) running: AtomicBool,
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it (the fake server's state
/// stays usable for the rest of a test).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The running fake API server. Dropping it stops the server.
pub struct FakeApiServer {
    shared: Arc<Shared>,
    pki: Arc<Pki>,
    addr: SocketAddr,
    acceptor: tokio_rustls::TlsAcceptor,
    task: Mutex<Option<JoinHandle<()>>>,
    /// While stopped, the port, bound but not listening (see [`FakeApiServer::stop`]).
    reserved: Mutex<Option<tokio::net::TcpSocket>>,
}

impl FakeApiServer {
    /// Mints a CA and a server certificate, listens on `127.0.0.1` on a free port and starts
    /// serving. Must be called inside a tokio runtime.
    pub async fn start() -> Result<FakeApiServer, FakeError> {
        FakeApiServer::start_on(SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Like [`FakeApiServer::start`], on a given address.
    pub async fn start_on(addr: SocketAddr) -> Result<FakeApiServer, FakeError> {
        let pki = Pki::mint(&[])?;
        let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(pki.server_chain(), pki.server_key())?;
        let mut tls = tls;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let token = uuid::Uuid::new_v4().simple().to_string();
        FakeApiServer::serve(addr, Arc::new(pki), acceptor, token)
    }

    /// Another apiserver of the same cluster on `127.0.0.1` (a free port): the same CA, serving
    /// certificate and bearer token as this one, so the kubeconfig of this one reaches it, with
    /// its own objects and its own `/metrics` ([`FakeApiServer::set_metrics`]). What a
    /// highly available control plane's second instance is to a client that scrapes each one.
    pub async fn start_peer(&self) -> Result<FakeApiServer, FakeError> {
        FakeApiServer::serve(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            self.pki.clone(),
            self.acceptor.clone(),
            self.token(),
        )
    }

    fn serve(
        addr: SocketAddr,
        pki: Arc<Pki>,
        acceptor: tokio_rustls::TlsAcceptor,
        token: String,
    ) -> Result<FakeApiServer, FakeError> {
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new()),
            token: Mutex::new(token),
            metrics: Mutex::new(String::new()),
            denials: Mutex::new(Vec::new()),
            expiry: Mutex::new(WatchExpiry::default()),
            requests: Mutex::new(Vec::new()),
            git_version: Mutex::new("v1.33.0-hookscope-fake".to_string()),
            served: Mutex::new(
                FakeResource::ALL
                    .into_iter()
                    .map(|r| {
                        let versions = r.default_versions().iter().map(|v| v.to_string());
                        (r, versions.collect())
                    })
                    .collect(),
            ),
            running: AtomicBool::new(true),
        });
        let listener = serve::bind(addr).map_err(|source| FakeError::Listen { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| FakeError::Listen { addr, source })?;
        let task = tokio::spawn(serve::accept_loop(
            listener,
            acceptor.clone(),
            shared.clone(),
        ));
        Ok(FakeApiServer {
            shared,
            pki,
            addr,
            acceptor,
            task: Mutex::new(Some(task)),
            reserved: Mutex::new(None),
        })
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The CA that signed the server certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        self.pki.ca_pem()
    }

    /// The bearer token the server accepts.
    pub fn token(&self) -> String {
        lock(&self.shared.token).clone()
    }

    /// Replaces the accepted bearer token (requests with the old one then get 401).
    pub fn set_token(&self, token: &str) {
        *lock(&self.shared.token) = token.to_string();
    }

    /// A kubeconfig with one cluster, user and context, all named `name`, selected as
    /// `current-context`: server URL, `certificate-authority-data` and the bearer token.
    pub fn kubeconfig_named(&self, name: &str) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(self.ca_pem());
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\ncurrent-context: {name}\n",
            url = self.url(),
            token = self.token(),
        )
    }

    /// [`FakeApiServer::kubeconfig_named`] with the name `fake`.
    pub fn kubeconfig(&self) -> String {
        self.kubeconfig_named("fake")
    }

    /// Stops listening and closes every connection (open watches end abruptly); returns once the
    /// port is closed, so a client connecting afterwards is refused. The port normally stays
    /// bound to this server (not listening) until [`FakeApiServer::restart`], which keeps the
    /// objects and the resourceVersion. Meant for one caller at a time: a second `stop` while one
    /// is under way returns at once.
    pub async fn stop(&self) {
        if let Some(task) = self.halt() {
            // An aborted task's future, and with it the listener, is dropped before this resolves.
            let _ = task.await;
            *lock(&self.reserved) = serve::reserve(self.addr).ok();
        }
    }

    fn halt(&self) -> Option<JoinHandle<()>> {
        self.shared.running.store(false, Ordering::SeqCst);
        let task = lock(&self.task).take();
        if let Some(task) = &task {
            task.abort();
        }
        lock(&self.shared.store).subscribers.clear();
        task
    }

    /// Listens again on the same address (after [`FakeApiServer::stop`]; a no-op while running).
    pub async fn restart(&self) -> Result<(), FakeError> {
        if lock(&self.task).is_some() {
            return Ok(());
        }
        let reserved = lock(&self.reserved).take();
        let listener = match reserved {
            Some(socket) => socket.listen(serve::BACKLOG),
            None => self.bind_again().await,
        }
        .map_err(|source| FakeError::Listen {
            addr: self.addr,
            source,
        })?;
        self.shared.running.store(true, Ordering::SeqCst);
        let mut task = lock(&self.task);
        *task = Some(tokio::spawn(serve::accept_loop(
            listener,
            self.acceptor.clone(),
            self.shared.clone(),
        )));
        Ok(())
    }

    /// Binds the address again without a reserved socket (a `stop` cancelled before it ended):
    /// the aborted accept loop releases the port when its task is next run.
    async fn bind_again(&self) -> std::io::Result<tokio::net::TcpListener> {
        let mut attempts = 0;
        loop {
            match serve::bind(self.addr) {
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && attempts < 200 => {
                    attempts += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                bound => return bound,
            }
        }
    }

    /// Creates an object (its `kind` picks the resource) as `manager` (operation `Update`, as a
    /// client-side create records it); returns the stored object.
    pub fn create(&self, manager: &str, object: Value) -> Result<Value, FakeError> {
        let resource = resource_of(&object)?;
        lock(&self.shared.store).create(resource, object, update_by(manager))
    }

    /// Replaces an existing object as `manager` (operation `Update`); returns the stored object.
    pub fn update(&self, manager: &str, object: Value) -> Result<Value, FakeError> {
        let resource = resource_of(&object)?;
        lock(&self.shared.store).update(resource, object, update_by(manager))
    }

    /// Deletes an object (a namespaced one by `namespace/name`); returns it as the DELETED event
    /// carries it.
    pub fn delete(&self, resource: FakeResource, name: &str) -> Result<Value, FakeError> {
        lock(&self.shared.store).delete(resource, name)
    }

    /// The stored object, if any.
    pub fn get(&self, resource: FakeResource, name: &str) -> Option<Value> {
        lock(&self.shared.store)
            .objects
            .get(&(resource, name.to_string()))
            .cloned()
    }

    /// The current (global) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        lock(&self.shared.store).resource_version
    }

    /// Advances the resourceVersion by `writes`, as writes to other resources do in a real
    /// cluster; watches see nothing.
    pub fn bump_unrelated(&self, writes: u64) {
        lock(&self.shared.store).bump_unrelated(writes);
    }

    /// Forgets the event history: watches and `continue` tokens from any resourceVersion older
    /// than the current one are now answered with 410 Gone.
    pub fn expire_history(&self) {
        let mut store = lock(&self.shared.store);
        store.oldest_watchable = store.resource_version;
        store.history.clear();
    }

    /// How an expired watch is refused.
    pub fn set_watch_expiry(&self, expiry: WatchExpiry) {
        *lock(&self.shared.expiry) = expiry;
    }

    /// Sends a BOOKMARK with the current resourceVersion on every open watch that asked for
    /// bookmarks.
    pub fn send_bookmarks(&self) {
        lock(&self.shared.store).bookmark_all();
    }

    /// Ends every open watch cleanly (the response body finishes), as an apiserver restart or a
    /// load balancer might.
    pub fn drop_watches(&self) {
        lock(&self.shared.store).subscribers.clear();
    }

    /// How many watches are open.
    pub fn open_watches(&self) -> usize {
        let mut store = lock(&self.shared.store);
        store.subscribers.retain(|s| !s.lines.is_closed());
        store.subscribers.len()
    }

    /// Denies a verb on a resource, or a path, with 403 Forbidden until [`FakeApiServer::allow`].
    pub fn forbid(&self, denial: Denial) {
        let mut denials = lock(&self.shared.denials);
        if !denials.contains(&denial) {
            denials.push(denial);
        }
    }

    /// Lifts a denial.
    pub fn allow(&self, denial: &Denial) {
        lock(&self.shared.denials).retain(|d| d != denial);
    }

    /// Sets the text `GET /metrics` serves.
    pub fn set_metrics(&self, text: &str) {
        *lock(&self.shared.metrics) = text.to_string();
    }

    /// Sets the `gitVersion` `GET /version` answers (`major` and `minor` follow it, as
    /// kube-apiserver derives them from the same build: `v1.38.1` gives `1` and `38`).
    pub fn set_git_version(&self, git_version: &str) {
        *lock(&self.shared.git_version) = git_version.to_string();
    }

    /// Serves `resource` in `versions` (most preferred first) from now on, in discovery and at
    /// its paths; none: the resource is not served (absent from discovery, 404 at its paths),
    /// as a release or a disabled feature gate leaves it. Its objects stay stored.
    pub fn serve_versions(&self, resource: FakeResource, versions: &[&str]) {
        lock(&self.shared.served)
            .insert(resource, versions.iter().map(|v| v.to_string()).collect());
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.halt();
    }
}

impl fmt::Debug for FakeApiServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakeApiServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

fn update_by(manager: &str) -> store::Write<'_> {
    store::Write {
        manager,
        operation: "Update",
        dry_run: false,
        prepared: false,
    }
}

fn resource_of(object: &Value) -> Result<FakeResource, FakeError> {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    FakeResource::from_kind(kind).ok_or_else(|| FakeError::UnknownKind(kind.to_string()))
}

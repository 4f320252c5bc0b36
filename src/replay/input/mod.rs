//! Loaders for captured requests: AdmissionReview documents and `audit.k8s.io/v1` audit logs,
//! turned into [`CapturedRequest`](super::CapturedRequest)s for the replay.
//!
//! [`Reader`] detects the format of each input by its first bytes:
//! * `[`: a JSON array of documents, read one element at a time;
//! * `{` with a complete value on the first line: JSON lines (an audit log, or one AdmissionReview
//!   a line), read line by line; positions are lines;
//! * `{` otherwise: JSON documents one after another (pretty-printed), or one list document whose
//!   `items` (an `EventList`) are read one at a time; positions are documents;
//! * anything else: YAML documents separated by `---`.
//!
//! Whatever the format, each document is an `admission.k8s.io/v1` or `v1beta1` `AdmissionReview`
//! (replayed as captured; with a `response` too, its `request` is used), an `audit.k8s.io`
//! `Event` (v1, v1beta1 or v1alpha1), or a list of them; or one of the shapes of `wrapped.rs`: an
//! envelope around events (AKS diagnostic records, CloudWatch payloads, container log lines), a
//! bare `AdmissionRequest`, or a plain manifest, replayed as the create `kubectl create -f` sends. Input is streamed: memory holds one line or document, the objects
//! needed as old objects, and the audit requests whose final stage is still to come.
//!
//! # Audit logs
//!
//! Only events that went through admission become requests: `create`, `update`, `patch`, `delete`
//! and `deletecollection` on resources, and connect requests (`exec`, `attach`, `portforward`,
//! `proxy`, whatever their verb). Reads and non-resource requests are skipped, and so are requests
//! authorization denied (they never reached admission); they are counted once each, at their
//! final stage ([`Reader::skipped_events`]). Each request is taken
//! from the final stage of its `auditID` (`ResponseComplete` or `Panic`); requests whose final
//! stage never comes are emitted by [`Reader::finish`] from the latest stage seen, with a note.
//!
//! The request is rebuilt as kube-apiserver's handlers build it: the operation from the verb
//! (an update answered 201 created the object: CREATE), the kind registered for the resource (or
//! the object's own for custom resources), `CreateOptions`/`UpdateOptions`/`DeleteOptions` from
//! the request URI (or the recorded DeleteOptions body), `dryRun` from them, the user from
//! `impersonatedUser` when set (else `user`), and the objects:
//! * create: `requestObject`, with the metadata the handler clears (`uid`, `creationTimestamp`, …)
//!   cleared and its namespace set to the request's;
//! * update: `requestObject`; the old object is the last state of that object seen before (the
//!   response of a successful write, an object in a get or list response, or `--cluster`);
//! * patch: the patch applied to that old object: a JSON patch (a JSON array) with
//!   [`crate::jsonpatch`], an object as an RFC 7386 merge patch (evanphx's, as the apiserver).
//!   The event does not record the Content-Type: an object body is taken as a merge patch only
//!   where no other type is possible or gives the same object; strategic merge patches
//!   (`$`-directives), server-side apply (`force`, a create by patch), object patches that a
//!   strategic merge would treat differently (lists in a built-in type) and object patches that
//!   may be an apply (`apiVersion`, `kind` and a `fieldManager`) are not replayable, with the
//!   reason;
//! * delete: the old object, with the DeleteOptions as `rest.BeforeDelete` leaves them (a pod's
//!   grace period filled in); deletecollection: one DELETE per item of the response, with an
//!   empty name, as upstream;
//! * connect: the options object (`PodExecOptions`, …) rebuilt from the URI.
//!
//! Nothing is guessed silently: a request without what a faithful replay needs (no request body
//! at level `Metadata`, an old object never seen or seen at another version, a patch of unknown
//! type) is [`InputItem::NotReplayable`] with the reason, and assumptions the loader did make are
//! listed in the request's `notes`.
//!
//! Not reproduced (and not reported per request, since they hold for every request): the
//! `managedFields` the apiserver's field manager writes before admission, and defaults the
//! apiserver would give to fields a patch adds.
//!
//! Namespace labels come from `--cluster` files and from the log's Namespace objects (the same
//! sources as old objects), as they were when the request was made.

mod audit;
mod cluster;
mod intern;
mod merge;
mod order;
mod query;
mod review;
use crate::scan;
mod store;
mod stream;
mod wrapped;

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use crate::KubeVersion;
use crate::edit::locate::Locator;
use crate::engine::Attributes;
use crate::registry::ResourceRegistry;

pub use cluster::{ClusterState, ObjectError};
pub use intern::Interner;
pub use wrapped::default_manifest_user;

use super::{IndexUnit, InputItem, InputProblem, SourceRef};
use order::{Held, Out};
use store::Store;
use stream::{JsonDocs, Piece, Positions, YamlDocs};

/// Where items go, in input order.
type Sink<'s, 'o> = &'s mut Out<'o>;

/// An audit request whose final stage has not been read yet.
struct Pending {
    seq: u64,
    stage: String,
    text: Box<[u8]>,
    source: SourceRef,
}

/// Reads captured requests, auto-detecting the format of each input (see the
/// [module documentation](self)). State carries over from one input to the next, so a log split
/// over several files is read in order as one.
#[derive(Debug)]
pub struct Reader {
    store: Store,
    registry: ResourceRegistry,
    builtin: ResourceRegistry,
    pending: HashMap<String, Pending>,
    seq: u64,
    /// Items held behind the requests of `pending`, in input order (see `order.rs`).
    held: Held,
    intern: Interner,
    /// The last document was an AdmissionReview that [`review::read`] took alone: the next one
    /// is tried that way first, before its kind is looked for.
    reviews: bool,
    /// Audit events read whole (any verb, any stage): an input of them is readable even when
    /// none went through admission.
    events: u64,
    /// Audit requests, at their final stage, that did not go through admission.
    skipped: u64,
    /// Where the bytes of the document being read were in the input, when it was compacted.
    positions: Positions,
    /// The paramKinds (apiVersion, kind) of the ValidatingAdmissionPolicies replayed.
    param_kinds: Vec<(String, String)>,
    /// Their objects at the store's generation, shared by the requests read meanwhile.
    params: Option<(u64, Arc<crate::engine::policy::ParamObjects>)>,
    /// The user plain manifests are created as, and whether the user chose it.
    manifest_user: (crate::api::meta::UserInfo, bool),
    /// The text of the YAML document being read and the line of the input it starts on, to
    /// place a problem at the line of the field it names.
    yaml_document: Option<(String, usize)>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pending({} at {})", self.stage, self.source)
    }
}

impl Reader {
    /// A reader that knows `cluster`'s objects and namespaces, with the built-in resources of the
    /// newest modelled release and the custom resources defined in `cluster`.
    pub fn new(cluster: ClusterState) -> Self {
        let registry = cluster.registry(KubeVersion::NEWEST);
        Self::assemble(
            cluster,
            registry,
            ResourceRegistry::builtin(KubeVersion::NEWEST),
        )
    }

    /// A reader resolving kinds with `registry` (the release and custom resources the replay
    /// models; `cluster`'s custom resources are not added to it).
    pub fn with_registry(cluster: ClusterState, registry: ResourceRegistry) -> Self {
        Self::assemble(
            cluster,
            registry,
            ResourceRegistry::builtin(KubeVersion::NEWEST),
        )
    }

    fn assemble(
        cluster: ClusterState,
        registry: ResourceRegistry,
        builtin: ResourceRegistry,
    ) -> Self {
        Reader {
            store: cluster.into_store(),
            registry,
            builtin,
            pending: HashMap::new(),
            seq: 0,
            held: Held::default(),
            intern: Interner::default(),
            reviews: false,
            events: 0,
            skipped: 0,
            positions: Positions::default(),
            param_kinds: Vec::new(),
            params: None,
            manifest_user: (wrapped::default_manifest_user(), false),
            yaml_document: None,
        }
    }

    /// Resolves kinds with `spec`'s custom resource too (a definition read from the cluster).
    pub fn add_custom_resource(&mut self, spec: &crate::registry::CustomResourceSpec) {
        self.registry.add_custom_resource(spec);
    }

    /// Declares the paramKinds (apiVersion, kind) of the ValidatingAdmissionPolicies replayed:
    /// every request read from now on carries the objects of those kinds known at that point
    /// ([`CapturedRequest::params`]: from `--cluster` and from the audit log before it).
    pub fn track_params(&mut self, kinds: Vec<(String, String)>) {
        self.param_kinds = kinds;
        self.params = None;
    }

    /// Attaches the parameter objects known now to a request.
    fn attach_params(&mut self, req: &mut super::CapturedRequest) {
        if self.param_kinds.is_empty() {
            return;
        }
        let generation = self.store.generation();
        let params = match &self.params {
            Some((g, p)) if *g == generation => Arc::clone(p),
            _ => {
                let p = Arc::new(crate::engine::policy::ParamObjects::new(
                    self.store.objects_of_kinds(&self.param_kinds),
                ));
                self.params = Some((generation, Arc::clone(&p)));
                p
            }
        };
        req.params = Some(params);
    }

    /// Audit requests read so far that did not go through admission, counted once at their
    /// final stage: reads (`get`, `list`, `watch`), non-resource requests (`/healthz`, …) and
    /// requests authorization refused.
    pub fn skipped_events(&self) -> u64 {
        self.skipped
    }

    /// Number of objects currently known (kept for old-object lookups).
    pub fn known_objects(&self) -> usize {
        self.store.len()
    }

    /// Number of audit requests waiting for their final stage.
    pub fn pending_requests(&self) -> usize {
        self.pending.len()
    }

    /// Reads one JSON document already split from its input (an audit log line, one item of an
    /// `EventList`), found at `source`: the same as the document would give inside a whole input,
    /// so events can be fed one at a time as they arrive. Call [`finish`](Self::finish) at the end.
    pub fn read_document(
        &mut self,
        source: SourceRef,
        text: &[u8],
        sink: &mut dyn FnMut(InputItem),
    ) {
        let text = trim(text);
        if !text.is_empty() {
            self.json_text(text, source, "", None, &mut Out::direct(sink));
        }
    }

    /// Whether the audit request `audit_id` was seen at an early stage and waits for its final one.
    pub fn is_pending(&self, audit_id: &str) -> bool {
        self.pending.contains_key(audit_id)
    }

    /// Reads one input (`name` is the path as given, or `-` for stdin), calling `sink` for each
    /// item in input order, streaming. Returns `Err` only when the input cannot be read at all: an
    /// IO error, or content that is empty or neither JSON nor YAML text; bad documents are items.
    ///
    /// Items read after an audit request seen at an early stage are held until its final stage
    /// comes (then the request is replayed there), or until [`finish`](Self::finish) replays it
    /// from that stage before them (see `order.rs`): call it at the end.
    pub fn read(
        &mut self,
        name: &str,
        input: &mut dyn BufRead,
        sink: &mut dyn FnMut(InputItem),
    ) -> Result<(), InputProblem> {
        let mut held = std::mem::take(&mut self.held);
        let read = self.read_ordered(name, input, &mut Out::ordered(sink, &mut held));
        self.held = held;
        read
    }

    fn read_ordered(
        &mut self,
        name: &str,
        input: &mut dyn BufRead,
        sink: Sink<'_, '_>,
    ) -> Result<(), InputProblem> {
        let whole = |message: String| whole_input(name, message);
        let io_err = |e: io::Error| whole(format!("cannot read: {e}"));
        let (first, line) = start(input).map_err(io_err)?;
        match first {
            None => Err(whole("empty input: no JSON or YAML document".into())),
            Some(b'[') => self
                .read_documents(name, input, Vec::new(), line, sink)
                .map_err(io_err),
            Some(b'{') => self.read_json(name, input, line, sink).map_err(io_err),
            Some(_) => {
                let head = input.fill_buf().map_err(io_err)?;
                let head = &head[..head.len().min(8192)];
                let text_like = !head.contains(&0)
                    && std::str::from_utf8(head).map_or_else(|e| e.error_len().is_none(), |_| true);
                if !text_like {
                    return Err(whole("not JSON or YAML text".into()));
                }
                self.read_yaml(name, input, line, sink)
                    .map_err(|e| match e {
                        YamlEnd::Io(e) => io_err(e),
                        YamlEnd::NotObjects(m) => whole(m),
                    })
            }
        }
    }

    /// Opens `path` (`-`: standard input) and [`read`](Self::read)s it.
    pub fn read_path(
        &mut self,
        path: &str,
        sink: &mut dyn FnMut(InputItem),
    ) -> Result<(), InputProblem> {
        self.read_path_counted(path, None, sink)
    }

    /// Reads `paths` in order (`-`: standard input), then [`finish`](Self::finish)es. Returns
    /// how many inputs could be read and the problems of those that could not: an input that
    /// cannot be opened or read, is empty or not JSON or YAML text, or whose every document is
    /// invalid (its invalid documents are items too, as always). `read_bytes`,
    /// when given, counts the bytes read as they are read (progress of a long input).
    pub fn read_paths(
        &mut self,
        paths: &[String],
        read_bytes: Option<&Arc<AtomicU64>>,
        sink: &mut dyn FnMut(InputItem),
    ) -> (usize, Vec<InputProblem>) {
        let mut readable = 0;
        let mut problems = Vec::new();
        for path in paths {
            match self.read_path_counted(path, read_bytes, sink) {
                Ok(()) => readable += 1,
                Err(p) => problems.push(p),
            }
        }
        self.finish(sink);
        (readable, problems)
    }

    fn read_path_counted(
        &mut self,
        path: &str,
        read_bytes: Option<&Arc<AtomicU64>>,
        sink: &mut dyn FnMut(InputItem),
    ) -> Result<(), InputProblem> {
        let events = self.events;
        let mut tally = Tally::default();
        let mut counted = |item: InputItem| {
            // Items held behind an earlier input's request may come out now: not this one's.
            if item_source(&item).file == path {
                tally.count(&item);
            }
            sink(item)
        };
        if path == "-" {
            let stdin = io::stdin();
            let mut input = Counting::buffered(stdin.lock(), read_bytes);
            self.read(path, &mut input, &mut counted)?;
        } else {
            let mut input = match std::fs::File::open(path) {
                Ok(f) => Counting::buffered(f, read_bytes),
                Err(e) => return Err(whole_input(path, format!("cannot open: {e}"))),
            };
            self.read(path, &mut input, &mut counted)?;
        }
        match &tally.first_invalid {
            Some(first) if tally.usable == 0 && self.events == events => {
                Err(whole_input(path, tally.nothing_readable(first)))
            }
            _ => Ok(()),
        }
    }

    /// Called after the last input: emits the audit requests still waiting for their final stage
    /// (a log cut short, a connection still open), from the latest stage seen, with a note.
    /// Each goes where its latest stage was read, before the items read after it (held until
    /// now), unless more than [`order::MAX_HELD`] items were read after it: then it comes after
    /// them.
    pub fn finish(&mut self, sink: &mut dyn FnMut(InputItem)) {
        let mut pending: Vec<Pending> = self.pending.drain().map(|(_, p)| p).collect();
        pending.sort_by_key(|p| p.seq);
        let mut held = std::mem::take(&mut self.held);
        let mut out = Out::ordered(sink, &mut held);
        for p in pending {
            let note = format!(
                "the final stage of this request never arrived: replayed from its {} event",
                p.stage
            );
            let mut items = Vec::new();
            // The text was scanned when it was read.
            if let Ok(spans) = scan::find_by(&p.text, (0, p.text.len()), audit::key_index) {
                let mut built = |item| items.push(item);
                let mut direct = Out::direct(&mut built);
                self.audit_event(&p.text, &spans, p.source, Some(note), &mut direct);
            }
            out.fill(p.seq, items);
        }
        out.finish();
    }

    /// A `{`-started input: JSON lines when the first line (or, after a broken first line, the
    /// second) is a complete value, else JSON documents.
    fn read_json(
        &mut self,
        name: &str,
        input: &mut dyn BufRead,
        line: usize,
        sink: Sink<'_, '_>,
    ) -> io::Result<()> {
        let mut first = Vec::new();
        input.read_until(b'\n', &mut first)?;
        if complete_line(&first) {
            return self.read_lines(name, input, vec![first], line, sink);
        }
        if trim(&first) == b"{" {
            return self.read_documents(name, input, first, line, sink);
        }
        let mut second = Vec::new();
        input.read_until(b'\n', &mut second)?;
        if complete_line(&second) {
            return self.read_lines(name, input, vec![first, second], line, sink);
        }
        first.extend_from_slice(&second);
        self.read_documents(name, input, first, line, sink)
    }

    /// JSON lines: each line is handled where the reader buffered it; only a line that spans
    /// two buffer fills is copied.
    fn read_lines(
        &mut self,
        name: &str,
        input: &mut dyn BufRead,
        read: Vec<Vec<u8>>,
        mut line_no: usize,
        sink: Sink<'_, '_>,
    ) -> io::Result<()> {
        for line in read {
            self.json_line(name, &line, line_no, sink);
            line_no += 1;
        }
        let mut partial: Vec<u8> = Vec::new();
        loop {
            let buf = match input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                if !partial.is_empty() {
                    self.json_line(name, &partial, line_no, sink);
                }
                return Ok(());
            }
            let mut start = 0;
            while let Some(end) = scan::find_byte(buf, start, b'\n') {
                if partial.is_empty() {
                    self.json_line(name, &buf[start..end], line_no, sink);
                } else {
                    partial.extend_from_slice(&buf[start..end]);
                    self.json_line(name, &partial, line_no, sink);
                    partial.clear();
                }
                line_no += 1;
                start = end + 1;
            }
            partial.extend_from_slice(&buf[start..]);
            let used = buf.len();
            input.consume(used);
        }
    }

    fn json_line(&mut self, name: &str, line: &[u8], line_no: usize, sink: Sink<'_, '_>) {
        let text = trim(line);
        if !text.is_empty() {
            self.positions = Positions::line(line_no);
            self.json_text(text, source(name, line_no, IndexUnit::Line), "", None, sink);
        }
    }

    fn read_documents(
        &mut self,
        name: &str,
        input: &mut dyn BufRead,
        prefix: Vec<u8>,
        line: usize,
        sink: Sink<'_, '_>,
    ) -> io::Result<()> {
        let mut docs = JsonDocs::new(input, prefix, line);
        while let Some(piece) = docs.next_piece()? {
            match piece {
                Piece::Value {
                    text,
                    doc,
                    positions,
                } => {
                    self.positions = positions;
                    self.json_text(
                        &text,
                        source(name, doc, IndexUnit::Document),
                        "",
                        None,
                        sink,
                    );
                }
                Piece::Item {
                    text,
                    doc,
                    item,
                    list_kind,
                    positions,
                } => {
                    self.positions = positions;
                    let prefix = format!("items[{item}]");
                    let source = source(name, doc, IndexUnit::Document);
                    self.json_text(
                        &text,
                        source,
                        &prefix,
                        Some(list_kind.as_deref().unwrap_or("List")),
                        sink,
                    );
                }
                Piece::Invalid { doc, message } => sink.push(InputItem::Invalid(InputProblem {
                    source: source(name, doc, IndexUnit::Document),
                    field: String::new(),
                    message: format!("invalid JSON: {message}"),
                })),
            }
        }
        Ok(())
    }

    fn read_yaml(
        &mut self,
        name: &str,
        input: &mut dyn BufRead,
        line: usize,
        sink: Sink<'_, '_>,
    ) -> Result<(), YamlEnd> {
        let mut docs = YamlDocs::new(input, line);
        let mut first = true;
        while let Some(doc) = docs.next_doc().map_err(YamlEnd::Io)? {
            let source = source(name, doc.doc, IndexUnit::Document);
            match crate::yaml::from_str::<Value>(&doc.text) {
                Ok(v) => {
                    if first && !matches!(v, Value::Object(_) | Value::Array(_) | Value::Null) {
                        return Err(YamlEnd::NotObjects(
                            "not JSON or YAML documents: the first document is plain text".into(),
                        ));
                    }
                    self.yaml_document = Some((doc.text, doc.first_line));
                    self.value_doc(v, source, "", None, sink);
                    self.yaml_document = None;
                }
                Err(e) => sink.push(InputItem::Invalid(InputProblem {
                    source,
                    field: String::new(),
                    message: yaml_error(&e, doc.first_line),
                })),
            }
            first = false;
        }
        Ok(())
    }

    /// A document parsed from YAML: arrays are read element by element, objects as JSON text.
    fn value_doc(
        &mut self,
        v: Value,
        source: SourceRef,
        prefix: &str,
        list_kind: Option<&str>,
        sink: Sink<'_, '_>,
    ) {
        match v {
            Value::Null => {}
            Value::Array(items) => {
                for (i, item) in items.into_iter().enumerate() {
                    self.value_doc(
                        item,
                        source.clone(),
                        &join(prefix, &format!("[{i}]")),
                        list_kind,
                        sink,
                    );
                }
            }
            other => match serde_json::to_vec(&other) {
                Ok(text) => self.json_text(&text, source, prefix, list_kind, sink),
                Err(e) => sink.push(invalid(source, prefix, "", e.to_string())),
            },
        }
    }

    /// The request of an AdmissionReview that [`review::read`] took alone.
    fn review_read_alone(
        &mut self,
        (attrs, uid): (Attributes, String),
        source: SourceRef,
        sink: Sink<'_, '_>,
    ) {
        let mut req = review::captured(attrs, uid, source, &self.store);
        self.intern.namespace(&mut req.namespace);
        self.attach_params(&mut req);
        sink.push(InputItem::Request(Box::new(req)));
    }

    /// One JSON document or line: an audit event, an AdmissionReview, or a list of them.
    fn json_text(
        &mut self,
        text: &[u8],
        source: SourceRef,
        prefix: &str,
        list_kind: Option<&str>,
        sink: Sink<'_, '_>,
    ) {
        // Positions are those of the document as read, not of the parts it is read in.
        let positions = std::mem::take(&mut self.positions);
        if self.reviews {
            if let Some(read) = review::read(text, &mut self.intern) {
                return self.review_read_alone(read, source, sink);
            }
            self.reviews = false;
        }
        let spans: audit::Spans = match scan::find_by(text, (0, text.len()), audit::key_index) {
            Ok(s) => s,
            Err(_) => {
                let message = match crate::json::from_slice::<serde::de::IgnoredAny>(text) {
                    Err(e) => format!("invalid JSON: {}", relocate(e.to_string(), &positions)),
                    Ok(_) => "expected a JSON object".to_string(),
                };
                return sink.push(invalid(source, prefix, "", message));
            }
        };
        let kind = spans[0]
            .and_then(|s| scan::string(text, s))
            .unwrap_or_default();
        let api_version = spans[1]
            .and_then(|s| scan::string(text, s))
            .unwrap_or_default();
        let looks_like_event = spans[3].is_some() && spans[4].is_some();
        let in_event_list = list_kind == Some("EventList");
        if kind == "Event" || (kind.is_empty() && (in_event_list || looks_like_event)) {
            // v1beta1 and v1alpha1 events hold the same fields under the same names (plus
            // `timestamp` and `metadata`, which replay does not need).
            if !matches!(
                &*api_version,
                "" | "audit.k8s.io/v1" | "audit.k8s.io/v1beta1" | "audit.k8s.io/v1alpha1"
            ) {
                let message = format!(
                    "unsupported audit event version {api_version:?} (audit.k8s.io/v1, v1beta1 or v1alpha1)"
                );
                return sink.push(self.problem(
                    (text, &positions),
                    source,
                    prefix,
                    "apiVersion",
                    message,
                ));
            }
            // Kept while the event is read, to place errors inside its members.
            self.positions = positions;
            self.audit_fast(text, &spans, source, sink);
            self.positions = Positions::default();
            return;
        }
        if kind == "AdmissionReview" {
            if let Some(read) = review::read(text, &mut self.intern) {
                self.reviews = true;
                return self.review_read_alone(read, source, sink);
            }
            // The request's objects are two levels down: each may nest as deep as a body.
            let doc = match scan::parse_within::<Value>(text, 2) {
                Ok(d) => d,
                Err(e) => {
                    let message = format!("invalid JSON: {}", relocate(e, &positions));
                    return sink.push(invalid(source, prefix, "", message));
                }
            };
            return match review::request(doc, source, &self.store) {
                Ok(mut req) => {
                    self.intern.request(&mut req);
                    self.attach_params(&mut req);
                    sink.push(InputItem::Request(Box::new(req)))
                }
                Err((b, source)) => {
                    sink.push(self.problem((text, &positions), source, prefix, &b.field, b.message))
                }
            };
        }
        if let (Some(items), true) = (spans[2], kind.ends_with("List")) {
            let kind = kind.into_owned();
            let mut found = Vec::new();
            if scan::elements(text, items, |i, sp| found.push((i, sp))).is_err() {
                return sink.push(self.problem(
                    (text, &positions),
                    source,
                    prefix,
                    "items",
                    "expected an array".into(),
                ));
            }
            for (i, (s, e)) in found {
                let p = join(prefix, &format!("items[{i}]"));
                self.json_text(&text[s..e], source.clone(), &p, Some(&kind), sink);
            }
            return;
        }
        if !matches!(
            &*kind,
            "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration"
        ) && self.unwrapped(text, &source, prefix, &positions, sink)
        {
            return;
        }
        let message = if kind.is_empty() {
            "missing: not an AdmissionReview, an audit.k8s.io Event, an AdmissionRequest or a manifest".to_string()
        } else if matches!(
            &*kind,
            "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration"
        ) {
            format!(
                "{kind:?} is a webhook configuration, not a captured request: give its file with --webhooks"
            )
        } else {
            format!("{kind:?} is not an AdmissionReview or an audit.k8s.io Event")
        };
        sink.push(self.problem((text, &positions), source, prefix, "kind", message))
    }
}

impl Reader {
    /// Sets the user plain manifests are created as (`--as`); without it they are created as
    /// [`default_manifest_user`], with a note saying so.
    pub fn set_manifest_user(&mut self, user: crate::api::meta::UserInfo) {
        self.manifest_user = (user, true);
    }

    /// Reads a document that holds or describes a request in another shape (see [`wrapped`]);
    /// `false` when it is none of them.
    fn unwrapped(
        &mut self,
        text: &[u8],
        source: &SourceRef,
        prefix: &str,
        positions: &Positions,
        sink: Sink<'_, '_>,
    ) -> bool {
        let doc = match scan::parse_within::<Value>(text, wrapped::MAX_WRAPPING) {
            Ok(doc) => doc,
            // Not JSON: nothing else to say about it than where the parser stopped.
            Err(e) => {
                let message = format!("invalid JSON: {}", relocate(e, positions));
                sink.push(invalid(source.clone(), prefix, "", message));
                return true;
            }
        };
        let (user, given) = &self.manifest_user;
        let Some(found) = wrapped::unwrap(&doc, &self.registry, user, *given) else {
            return false;
        };
        // The body is as deep as the shape found wraps it: a manifest is one.
        let wrapping = match &found {
            wrapped::Unwrapped::Create(..) => Some(0),
            wrapped::Unwrapped::Review(_, wrapping) => Some(*wrapping),
            _ => None,
        };
        if let Some(Err(e)) =
            wrapping.map(|w| crate::json::check_depth(text, crate::json::MAX_DEPTH + w))
        {
            let message = format!("invalid JSON: {}", relocate(e.to_string(), positions));
            sink.push(invalid(source.clone(), prefix, "", message));
            return true;
        }
        match found {
            wrapped::Unwrapped::Inner(docs) => {
                for (field, inner) in docs {
                    let inner = trim(&inner);
                    self.positions = positions.clone();
                    self.json_text(inner, source.clone(), &join(prefix, &field), None, sink);
                }
            }
            wrapped::Unwrapped::Review(review, _) => {
                match review::request(review, source.clone(), &self.store) {
                    Ok(mut req) => {
                        self.intern.request(&mut req);
                        self.attach_params(&mut req);
                        sink.push(InputItem::Request(Box::new(req)))
                    }
                    Err((b, source)) => sink.push(self.problem(
                        (text, positions),
                        source,
                        prefix,
                        &b.field,
                        b.message,
                    )),
                }
            }
            wrapped::Unwrapped::Create(event, note, defaulted) => {
                let Ok(spans) = scan::find_by(&event, (0, event.len()), audit::key_index) else {
                    return false;
                };
                let mut noted = |mut item: InputItem| {
                    if let InputItem::Request(r) = &mut item {
                        r.source.audit_id = None;
                        r.uid.clear();
                        r.audit = None;
                        r.notes.insert(0, note.clone());
                        if defaulted {
                            r.attrs.object = r
                                .attrs
                                .object
                                .take()
                                .map(|o| Arc::new(Arc::unwrap_or_clone(o).known_defaulted()));
                        }
                    }
                    sink.push(item)
                };
                // The event of a create: at its final stage, so nothing waits.
                self.audit_fast(&event, &spans, source.clone(), &mut Out::direct(&mut noted));
            }
            wrapped::Unwrapped::Refused(field, message) => {
                sink.push(self.problem((text, positions), source.clone(), prefix, &field, message))
            }
        }
        true
    }
}

impl Reader {
    /// A problem of the document being read (or of the part of it at `prefix`) with the field
    /// named, placed at the line of the input that field is on when it can be found: in the YAML
    /// document being read, else in `json`, the JSON text read and where its bytes were.
    fn problem(
        &self,
        json: (&[u8], &Positions),
        mut source: SourceRef,
        prefix: &str,
        field: &str,
        message: String,
    ) -> InputItem {
        // A line of JSON lines is its own place already.
        if !field.is_empty() && source.unit == IndexUnit::Document {
            source.line = match &self.yaml_document {
                Some((text, first_line)) => {
                    let path = join(prefix, field);
                    // An item of a `*List` is found as the locator finds items.
                    let item = path.strip_prefix("items[").and_then(|rest| {
                        let (i, rest) = rest.split_once(']')?;
                        Some((i.parse().ok()?, rest.trim_start_matches('.')))
                    });
                    let mut locator = Locator::new(text);
                    let at = match item {
                        Some((i, rest)) => locator.locate(1, Some(i), rest, None),
                        None => locator.locate(1, None, &path, None),
                    };
                    u32::try_from(at.line + first_line - 1).ok()
                }
                None => json_line(json, field),
            };
        }
        invalid(source, prefix, field, message)
    }
}

/// The line of the input where `field` of the JSON `text` is, by `positions` (none when the
/// text was not read from a document of the input).
fn json_line((text, positions): (&[u8], &Positions), field: &str) -> Option<u32> {
    let text = std::str::from_utf8(text).ok()?;
    let at = Locator::new(text).locate(1, None, field, None);
    let line_start: usize = text
        .split_inclusive('\n')
        .take(at.line - 1)
        .map(str::len)
        .sum();
    let column = at.column.unwrap_or(1).saturating_sub(1);
    let offset = line_start
        + text[line_start..]
            .chars()
            .take(column)
            .map(char::len_utf8)
            .sum::<usize>();
    positions
        .locate(offset)
        .and_then(|(line, _)| u32::try_from(line).ok())
}

/// A parser's message ending `at line 1 column N` in a compacted document, with the line and
/// column the byte was at in the input.
fn relocate(message: String, positions: &Positions) -> String {
    relocate_from(message, positions, 0)
}

/// [`relocate`] of a message about a part of the document that starts at offset `start`.
fn relocate_from(message: String, positions: &Positions, start: usize) -> String {
    let found = (message.rsplit_once(" at line 1 column "))
        .and_then(|(what, col)| Some((what, col.parse::<usize>().ok()?)))
        .and_then(|(what, col)| Some((what, positions.locate(start + col.saturating_sub(1))?)));
    match found {
        Some((what, (line, col))) => format!("{what} at line {line} column {col}"),
        None => message,
    }
}

/// Where `item` was read.
fn item_source(item: &InputItem) -> &SourceRef {
    match item {
        InputItem::Request(r) => &r.source,
        InputItem::NotReplayable(p) | InputItem::Invalid(p) => &p.source,
    }
}

/// A problem of input `name` as a whole.
fn whole_input(name: &str, message: String) -> InputProblem {
    InputProblem {
        source: source(name, 0, IndexUnit::Document),
        field: String::new(),
        message,
    }
}

/// What one input yielded, to tell an input of nothing but invalid documents.
#[derive(Default)]
struct Tally {
    /// Requests, replayable or not.
    usable: usize,
    invalid: usize,
    first_invalid: Option<InputProblem>,
}

impl Tally {
    fn count(&mut self, item: &InputItem) {
        match item {
            InputItem::Request(_) | InputItem::NotReplayable(_) => self.usable += 1,
            InputItem::Invalid(p) => {
                self.invalid += 1;
                if self.first_invalid.is_none() {
                    self.first_invalid = Some(p.clone());
                }
            }
        }
    }

    /// Why an input whose documents were all invalid, `first` the first of them, is unreadable.
    fn nothing_readable(&self, first: &InputProblem) -> String {
        let unit = match first.source.unit {
            IndexUnit::Line => "line",
            IndexUnit::Document => "document",
        };
        let all = match self.invalid {
            1 => format!("its only {unit} is invalid"),
            n => format!("all {n} {unit}s are invalid"),
        };
        let field = if first.field.is_empty() {
            String::new()
        } else {
            format!("{}: ", first.field)
        };
        let line = match first.source.line {
            Some(line) if first.source.unit == IndexUnit::Document => format!(" line {line}"),
            _ => String::new(),
        };
        format!(
            "no readable request: {all} ({unit} {}{line}: {field}{})",
            first.source.index, first.message
        )
    }
}

/// How a YAML input ended early.
enum YamlEnd {
    Io(io::Error),
    NotObjects(String),
}

fn source(name: &str, index: usize, unit: IndexUnit) -> SourceRef {
    SourceRef {
        file: name.to_string(),
        index,
        unit,
        audit_id: None,
        line: None,
    }
}

fn join(prefix: &str, field: &str) -> String {
    match (
        prefix.is_empty(),
        field.is_empty() || field.starts_with('['),
    ) {
        (true, _) => field.to_string(),
        (false, true) => format!("{prefix}{field}"),
        (false, false) => format!("{prefix}.{field}"),
    }
}

fn invalid(source: SourceRef, prefix: &str, field: &str, message: String) -> InputItem {
    InputItem::Invalid(InputProblem {
        source,
        field: join(prefix, field),
        message,
    })
}

/// Skips a byte-order mark and whitespace; returns the first byte (not consumed) and its line.
fn start(input: &mut dyn BufRead) -> io::Result<(Option<u8>, usize)> {
    let mut line = 1;
    let mut at_start = true;
    loop {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok((None, line));
        }
        if at_start && buf.starts_with(b"\xEF\xBB\xBF") {
            input.consume(3);
            at_start = false;
            continue;
        }
        at_start = false;
        let ws = buf
            .iter()
            .take_while(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
            .count();
        line += buf[..ws].iter().filter(|&&b| b == b'\n').count();
        if ws < buf.len() {
            let first = buf[ws];
            input.consume(ws);
            return Ok((Some(first), line));
        }
        input.consume(ws);
    }
}

/// A YAML parse error of a document whose text starts on line `first_line` of its input, in one
/// line: its first line (the parser goes on with an excerpt of the document), without the
/// `error: ` prefix, at the line of the input.
fn yaml_error(e: &crate::yaml::Error, first_line: usize) -> String {
    let mut e = e.clone();
    e.line = e.line.map(|l| l + first_line.saturating_sub(1));
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    format!(
        "invalid YAML: {}",
        first.strip_prefix("error: ").unwrap_or(first)
    )
}

fn trim(line: &[u8]) -> &[u8] {
    line.trim_ascii()
}

/// True when `line` holds exactly one complete JSON object.
fn complete_line(line: &[u8]) -> bool {
    let t = trim(line);
    t.first() == Some(&b'{') && scan::value_end(t, 0) == Ok(t.len())
}

/// Counts the bytes read through it.
struct Counting<'a, R> {
    inner: R,
    read: Option<&'a Arc<AtomicU64>>,
}

impl<'a, R: Read> Counting<'a, R> {
    fn buffered(inner: R, read: Option<&'a Arc<AtomicU64>>) -> BufReader<Self> {
        BufReader::with_capacity(1 << 20, Counting { inner, read })
    }
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(read) = self.read {
            read.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(n)
    }
}

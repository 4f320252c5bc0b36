//! `audit.k8s.io/v1` events: which went through admission, and the admission request each one
//! was, rebuilt the way kube-apiserver's handlers build it.
//!
//! Two paths. Every event is first scanned ([`super::scan`]) for its top-level members; events
//! the replay ignores (reads, watches, non-resource requests, early stages) stop there, except
//! that successful get and list responses update the known objects. For events that went through
//! admission each member is then decoded on its own from its place in the line (so a bad one is
//! named), and the request and response objects only as far as needed.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::api::meta::short_eq;
use crate::api::{GroupVersionKind, GroupVersionResource, Operation, UserInfo};
use crate::engine::{Attributes, Object};
use crate::replay::{AuditOrigin, CapturedRequest, InputItem, InputProblem, SourceRef};

use super::merge::merge_patch;
use super::query::{self, Query};
use super::review::namespace_state;
use super::store;
use super::{Reader, Sink};
use crate::scan::{self, Span};

/// The top-level members of a document the loader looks at: those telling what it is, then every
/// member of an audit event it uses.
#[cfg(test)]
const KEYS: [&[u8]; 19] = [
    b"kind",
    b"apiVersion",
    b"items",
    b"auditID",
    b"stage",
    b"verb",
    b"objectRef",
    b"responseStatus",
    b"responseObject",
    b"requestURI",
    b"level",
    b"user",
    b"impersonatedUser",
    b"sourceIPs",
    b"userAgent",
    b"requestObject",
    b"requestReceivedTimestamp",
    b"stageTimestamp",
    b"annotations",
];
/// Spans of the members [`key_index`] knows, in a document.
pub(crate) type Spans = [Option<Span>; 19];
const K_AUDIT_ID: usize = 3;
const K_STAGE: usize = 4;
const K_VERB: usize = 5;
const K_OBJECT_REF: usize = 6;
const K_RESPONSE_STATUS: usize = 7;
const K_RESPONSE_OBJECT: usize = 8;
const K_REQUEST_URI: usize = 9;
const K_LEVEL: usize = 10;
const K_USER: usize = 11;
const K_IMPERSONATED: usize = 12;
const K_SOURCE_IPS: usize = 13;
const K_USER_AGENT: usize = 14;
const K_REQUEST_OBJECT: usize = 15;
const K_RECEIVED: usize = 16;
const K_STAGE_TIMESTAMP: usize = 17;
const K_ANNOTATIONS: usize = 18;

/// The slot of member name `k` among the members an event is scanned for (see `KEYS` in the
/// tests).
pub(crate) fn key_index(k: &[u8]) -> Option<usize> {
    // By length first: most names are told apart without comparing bytes.
    let i = match k.len() {
        4 => match k {
            b"kind" => 0,
            b"verb" => 5,
            b"user" => 11,
            _ => return None,
        },
        5 => match k {
            b"items" => 2,
            b"stage" => 4,
            b"level" => 10,
            _ => return None,
        },
        7 => (k == b"auditID").then_some(3)?,
        9 => match k {
            b"objectRef" => 6,
            b"sourceIPs" => 13,
            b"userAgent" => 14,
            _ => return None,
        },
        10 => match k {
            b"apiVersion" => 1,
            b"requestURI" => 9,
            _ => return None,
        },
        11 => (k == b"annotations").then_some(18)?,
        13 => (k == b"requestObject").then_some(15)?,
        14 => match k {
            b"responseStatus" => 7,
            b"responseObject" => 8,
            b"stageTimestamp" => 17,
            _ => return None,
        },
        16 => (k == b"impersonatedUser").then_some(12)?,
        24 => (k == b"requestReceivedTimestamp").then_some(16)?,
        _ => return None,
    };
    Some(i)
}

/// What types a server-side apply: a built-in kind's Go type, or a custom resource's schema.
enum Typed<'s> {
    Go(crate::schema::TypeId),
    Custom(crate::apply::CrdModel<'s>),
}

/// `objectRef`, borrowed from the event's text where no escape forbids it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct ObjectRef<'a> {
    #[serde(borrow)]
    resource: Cow<'a, str>,
    #[serde(borrow)]
    namespace: Cow<'a, str>,
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    api_group: Cow<'a, str>,
    #[serde(borrow)]
    api_version: Cow<'a, str>,
    #[serde(borrow)]
    subresource: Cow<'a, str>,
}

/// `responseStatus`, for its code.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct ResponseStatus {
    code: Option<i32>,
}

/// A decoded event; the request and response objects stay as text until needed.
struct Event<'a> {
    level: String,
    audit_id: String,
    stage: String,
    uri: String,
    verb: String,
    user: UserInfo,
    impersonated: Option<UserInfo>,
    source_ips: Vec<String>,
    user_agent: Option<String>,
    object_ref: Option<ObjectRef<'a>>,
    code: Option<i32>,
    request_object: Option<&'a [u8]>,
    /// Where `request_object` starts in the event's text.
    request_object_at: usize,
    response_object: Option<&'a [u8]>,
    received: Option<String>,
    stage_timestamp: Option<String>,
    annotations: BTreeMap<String, String>,
}

/// A member that could not be decoded: (field, message).
type FieldError = (String, String);

impl<'a> Event<'a> {
    /// Decodes the members at `spans` of `text`, each on its own.
    fn decode(text: &'a [u8], spans: &Spans) -> Result<Self, FieldError> {
        let raw = |i: usize| spans[i].map(|(s, e)| &text[s..e]).filter(|r| *r != b"null");
        fn member<'de, T: Deserialize<'de>>(
            raw: Option<&'de [u8]>,
            field: &str,
        ) -> Result<Option<T>, FieldError> {
            let Some(raw) = raw else {
                return Ok(None);
            };
            crate::json::from_slice(raw).map(Some).map_err(|e| {
                let text = e.to_string();
                let text = text
                    .rsplit_once(" at line ")
                    .map_or(text.as_str(), |(m, _)| m);
                (field.to_string(), text.to_string())
            })
        }
        let string = |i: usize, field: &str| -> Result<String, FieldError> {
            Ok(member::<Cow<'_, str>>(raw(i), field)?
                .map(Cow::into_owned)
                .unwrap_or_default())
        };
        Ok(Event {
            level: string(K_LEVEL, "level")?,
            audit_id: string(K_AUDIT_ID, "auditID")?,
            stage: string(K_STAGE, "stage")?,
            uri: string(K_REQUEST_URI, "requestURI")?,
            verb: string(K_VERB, "verb")?,
            user: member(raw(K_USER), "user")?.unwrap_or_default(),
            impersonated: member(raw(K_IMPERSONATED), "impersonatedUser")?,
            source_ips: member(raw(K_SOURCE_IPS), "sourceIPs")?.unwrap_or_default(),
            user_agent: member(raw(K_USER_AGENT), "userAgent")?,
            object_ref: member(raw(K_OBJECT_REF), "objectRef")?,
            code: member::<ResponseStatus>(raw(K_RESPONSE_STATUS), "responseStatus")?
                .and_then(|s| s.code),
            request_object: raw(K_REQUEST_OBJECT),
            request_object_at: spans[K_REQUEST_OBJECT].map_or(0, |(s, _)| s),
            response_object: raw(K_RESPONSE_OBJECT),
            received: member(raw(K_RECEIVED), "requestReceivedTimestamp")?,
            stage_timestamp: member(raw(K_STAGE_TIMESTAMP), "stageTimestamp")?,
            annotations: member(raw(K_ANNOTATIONS), "annotations")?.unwrap_or_default(),
        })
    }

    fn succeeded(&self) -> bool {
        self.code.is_some_and(|c| (200..300).contains(&c))
    }

    /// Whether the request body was recorded (level Request or above, at the final stage).
    fn body_recorded(&self) -> bool {
        matches!(self.level.as_str(), "Request" | "RequestResponse") && is_final(&self.stage)
    }

    fn level_text(&self) -> String {
        if is_final(&self.stage) {
            format!(
                "level {}",
                if self.level.is_empty() {
                    "unknown"
                } else {
                    &self.level
                }
            )
        } else {
            format!("stage {}", self.stage)
        }
    }
}

/// `ResponseComplete` and `Panic` end a request.
fn is_final(stage: &str) -> bool {
    matches!(stage, "ResponseComplete" | "Panic")
}

/// Connect subresources (upstream's `rest.Connecter` storages): admission sees CONNECT whatever
/// the HTTP method (and so the audit verb: `create` for POST, `get` for GET and websockets).
fn is_connect(group: &str, resource: &str, sub: &str) -> bool {
    group.is_empty()
        && matches!(
            (resource, sub),
            ("pods", "exec" | "attach" | "portforward" | "proxy") | ("services" | "nodes", "proxy")
        )
}

/// What becomes of one admission event.
enum Built {
    /// Items to emit (requests and not-replayable ones).
    Items(Vec<InputItem>),
    /// The event did not go through admission.
    Ignored,
}

/// An event that went through admission, with what every request built from it shares.
struct Ctx<'e, 'a> {
    ev: &'e Event<'a>,
    source: SourceRef,
    gvr: GroupVersionResource,
    sub: String,
    namespace: String,
    name: String,
    query: Query,
    notes: Vec<String>,
}

impl Ctx<'_, '_> {
    fn not_replayable(&self, field: &str, message: String) -> InputItem {
        InputItem::NotReplayable(InputProblem {
            source: self.source.clone(),
            field: field.to_string(),
            message,
        })
    }

    fn what(&self) -> String {
        let res = if self.sub.is_empty() {
            self.gvr.resource.clone()
        } else {
            format!("{}/{}", self.gvr.resource, self.sub)
        };
        if self.namespace.is_empty()
            || (self.gvr.group.is_empty() && self.gvr.resource == "namespaces")
        {
            format!("{res} {}", self.name)
        } else {
            format!("{res} {}/{}", self.namespace, self.name)
        }
    }
}

impl Reader {
    /// An audit event found by the fast path (`spans` by [`key_index`]).
    pub(crate) fn audit_fast(
        &mut self,
        text: &[u8],
        spans: &Spans,
        mut source: SourceRef,
        sink: Sink<'_, '_>,
    ) {
        let s = |i: usize| spans[i].and_then(|sp| scan::string(text, sp));
        if let Some(id) = s(K_AUDIT_ID) {
            source.audit_id = Some(id.into_owned());
        }
        let invalid = |field: &str, message: String, source: &SourceRef| {
            InputItem::Invalid(InputProblem {
                source: source.clone(),
                field: field.into(),
                message,
            })
        };
        let Some(stage) = s(K_STAGE) else {
            return sink.push(invalid("stage", "missing".into(), &source));
        };
        let final_stage = match &*stage {
            "ResponseComplete" | "Panic" => true,
            "RequestReceived" | "ResponseStarted" => false,
            other => {
                return sink.push(invalid(
                    "stage",
                    format!("unknown stage {other:?}"),
                    &source,
                ));
            }
        };
        let Some(verb) = s(K_VERB) else {
            return sink.push(invalid("verb", "missing".into(), &source));
        };
        self.events += 1;
        let skipped = u64::from(final_stage);
        if verb == "watch" {
            self.skipped += skipped;
            return;
        }
        // Non-resource requests (`/healthz`, `/version`, …) have no objectRef.
        let Some(oref_span) = spans[K_OBJECT_REF].filter(|sp| !scan::is_null(text, *sp)) else {
            self.skipped += skipped;
            return;
        };
        match &*verb {
            "create" | "update" | "patch" | "delete" | "deletecollection" => {}
            "get" | "list" => {
                let oref =
                    match crate::json::from_slice::<ObjectRef>(&text[oref_span.0..oref_span.1]) {
                        Ok(o) => o,
                        Err(e) => return sink.push(invalid("objectRef", e.to_string(), &source)),
                    };
                // Reads do not go through admission, except connect requests made with GET.
                if verb == "list" || !is_connect(&oref.api_group, &oref.resource, &oref.subresource)
                {
                    self.skipped += skipped;
                    if final_stage {
                        self.learn_read(text, spans, &oref, verb == "list");
                    }
                    return;
                }
            }
            other => return sink.push(invalid("verb", format!("unknown verb {other:?}"), &source)),
        }
        let Some(audit_id) = source.audit_id.clone() else {
            return sink.push(invalid("auditID", "missing".into(), &source));
        };
        if !final_stage {
            let (seq, replaced) = self.remember_pending(audit_id, stage.into_owned(), text, source);
            sink.wait(seq, replaced);
            return;
        }
        if let Some(earlier) = self.pending.remove(&audit_id) {
            // Replayed here, at its final stage: what waited behind its earlier stage goes first.
            sink.arrived(earlier.seq);
        }
        self.audit_event(text, spans, source, None, sink);
    }

    /// Updates the known objects from a successful get or list response.
    fn learn_read(&mut self, text: &[u8], spans: &Spans, oref: &ObjectRef<'_>, list: bool) {
        if !matches!(&*oref.subresource, "" | "status") {
            return;
        }
        let code = spans[K_RESPONSE_STATUS]
            .and_then(|sp| scan::find(text, sp, [b"code"]).ok())
            .and_then(|[c]| c)
            .and_then(|c| scan::integer(text, c));
        let (Some(200), Some(ro)) = (code, spans[K_RESPONSE_OBJECT]) else {
            return;
        };
        if !list {
            if let Some(m) =
                store::meta(text, ro).filter(|m| !m.kind.is_empty() && m.kind != "Status")
            {
                self.store
                    .put(&oref.api_group, &oref.resource, text, ro, &m, None);
            }
            return;
        }
        // A list is read once: its type meta (Go writes it first), then its items.
        let Ok([kind, api_version]) = scan::find_first(text, ro, [b"kind", b"apiVersion"]) else {
            return;
        };
        let list_kind = kind.and_then(|k| scan::string(text, k)).unwrap_or_default();
        let api_version = api_version
            .and_then(|k| scan::string(text, k))
            .unwrap_or_default();
        let Some(item_kind) = list_kind.strip_suffix("List").filter(|k| !k.is_empty()) else {
            return;
        };
        let Some(items) = scan::member_start(text, ro, b"items") else {
            return;
        };
        let store = &mut self.store;
        let _ = scan::elements_from(&text[..ro.1], items, |_, item| {
            if let Some(m) = store::item_meta(text, item) {
                store.put(
                    &oref.api_group,
                    &oref.resource,
                    text,
                    item,
                    &m,
                    Some((&api_version, item_kind)),
                );
            }
        });
    }

    /// Processes an event that went through admission (its final stage, or at the end the latest
    /// stage seen, with `note` saying so), then learns from its response.
    pub(crate) fn audit_event(
        &mut self,
        text: &[u8],
        spans: &Spans,
        mut source: SourceRef,
        note: Option<String>,
        sink: Sink<'_, '_>,
    ) {
        let ev = match Event::decode(text, spans) {
            Ok(ev) => ev,
            Err((field, message)) => {
                return sink.push(InputItem::Invalid(InputProblem {
                    source,
                    field,
                    message,
                }));
            }
        };
        if !ev.audit_id.is_empty() {
            source.audit_id = Some(ev.audit_id.clone());
        }
        // Non-resource requests have no objectRef (or one without a resource).
        let Some(oref) = ev.object_ref.clone().filter(|o| !o.resource.is_empty()) else {
            self.skipped += 1;
            return;
        };
        let built = self.build(&ev, &oref, source, note);
        if matches!(built, Built::Ignored) {
            self.skipped += 1;
        }
        if let Built::Items(items) = built {
            for mut item in items {
                if let InputItem::Request(r) = &mut item {
                    self.intern.request(r);
                    self.attach_params(r);
                }
                sink.push(item);
            }
        }
        self.learn_write(&ev, &oref);
    }

    fn build(
        &self,
        ev: &Event<'_>,
        oref: &ObjectRef<'_>,
        source: SourceRef,
        note: Option<String>,
    ) -> Built {
        // Authorization runs before admission: a denied request never reached it.
        if ev
            .annotations
            .get("authorization.k8s.io/decision")
            .is_some_and(|d| d != "allow")
        {
            return Built::Ignored;
        }
        let mut notes: Vec<String> = note.into_iter().collect();
        let mut version = oref.api_version.to_string();
        if version.is_empty() {
            match self
                .registry
                .preferred_version(&oref.api_group, &oref.resource)
            {
                Some(gvr) => {
                    notes.push(format!(
                        "objectRef has no apiVersion: took the preferred version {}",
                        gvr.version
                    ));
                    version = gvr.version;
                }
                None => {
                    return Built::Items(vec![InputItem::NotReplayable(InputProblem {
                        source,
                        field: "objectRef.apiVersion".into(),
                        message: format!(
                            "version unknown: objectRef names no apiVersion for {}",
                            oref.resource
                        ),
                    })]);
                }
            }
        }
        let gvr = GroupVersionResource::new(&oref.api_group, &version, &oref.resource);
        let mut namespace = oref.namespace.to_string();
        if namespace.is_empty() && gvr.group.is_empty() && gvr.resource == "namespaces" {
            namespace = oref.name.to_string();
        }
        let mut ctx = Ctx {
            ev,
            source,
            gvr,
            sub: oref.subresource.to_string(),
            namespace,
            name: oref.name.to_string(),
            query: Query::of_uri(&ev.uri),
            notes,
        };
        if is_connect(&oref.api_group, &oref.resource, &oref.subresource) {
            return Built::Items(vec![self.connect(&mut ctx)]);
        }
        let item = match ev.verb.as_str() {
            "create" => self.create(&mut ctx, false),
            // The update created the object: admission saw a CREATE.
            "update" if ev.code == Some(201) => self.create(&mut ctx, true),
            "update" => self.update(&mut ctx),
            "patch" => self.patch(&mut ctx),
            "delete" => self.delete(&mut ctx),
            "deletecollection" => return Built::Items(self.delete_collection(&mut ctx)),
            _ => return Built::Ignored,
        };
        Built::Items(vec![item])
    }

    /// The request as admission saw it, ready to emit.
    fn request(&self, ctx: &Ctx<'_, '_>, mut parts: Parts) -> InputItem {
        let ev = ctx.ev;
        if let Some(object) = parts.object.as_mut() {
            let old_managed = parts
                .old_object
                .as_ref()
                .and_then(|o| o.pointer("/metadata/managedFields"));
            add_managed_fields(object, ev.response_object, old_managed);
            match (parts.operation, parts.old_object.as_ref()) {
                (Operation::Create, _) => {
                    self.add_field_manager_entry(ctx, &parts.kind, object, parts.options.as_ref());
                }
                // Only entries kept from the old object are stale: a server-side apply and a
                // scale made their own.
                (Operation::Update, Some(old))
                    if !response_has_managed_fields(ev)
                        && object.pointer("/metadata/managedFields")
                            == old.pointer("/metadata/managedFields") =>
                {
                    self.update_managed_fields(
                        ctx,
                        &parts.kind,
                        object,
                        old,
                        parts.options.as_ref(),
                    );
                }
                _ => {}
            }
        }
        let (user_info, impersonator) = match &ev.impersonated {
            Some(u) => (u.clone(), Some(ev.user.clone())),
            None => (ev.user.clone(), None),
        };
        let attrs = Attributes {
            operation: parts.operation,
            kind: parts.kind.into(),
            resource: ctx.gvr.clone().into(),
            sub_resource: ctx.sub.clone(),
            namespace: ctx.namespace.clone(),
            name: parts.name.unwrap_or_else(|| ctx.name.clone()),
            object: parts.object.map(|o| match parts.defaulted {
                true => Arc::new(Object::new(o).known_defaulted()),
                false => Arc::new(Object::new(o)),
            }),
            old_object: parts.old_object.map(|o| Arc::new(Object::new(o))),
            dry_run: parts.options.as_ref().is_some_and(query::is_dry_run),
            options: parts.options.map(Arc::new),
            user_info: Arc::new(user_info),
        };
        let namespace = namespace_state(&attrs, &self.store);
        let audit = AuditOrigin {
            audit_id: ev.audit_id.clone(),
            verb: ev.verb.clone(),
            request_uri: ev.uri.clone(),
            source_ips: ev.source_ips.clone(),
            user_agent: ev.user_agent.clone(),
            request_received_timestamp: ev.received.clone(),
            stage_timestamp: ev.stage_timestamp.clone(),
            annotations: ev.annotations.clone(),
            response_code: ev.code,
            impersonator,
        };
        InputItem::Request(Box::new(CapturedRequest {
            source: ctx.source.clone(),
            uid: ev.audit_id.clone(),
            attrs,
            namespace,
            audit: Some(Box::new(audit)),
            notes: ctx.notes.clone(),
            params: None,
        }))
    }

    /// On a create whose object has no `managedFields` yet (the event's response did not show the
    /// stored object: a denied create), the entry the field manager gave it: the field manager's
    /// Update ([`crate::apply::update`]) by the request's `fieldManager` (or its user agent's first
    /// word) at the time the request was received.
    fn add_field_manager_entry(
        &self,
        ctx: &Ctx<'_, '_>,
        kind: &GroupVersionKind,
        object: &mut Value,
        options: Option<&Value>,
    ) {
        if object
            .pointer("/metadata/managedFields")
            .is_some_and(|m| !m.is_null())
        {
            return;
        }
        let reset = self.status_reset(ctx);
        let none = crate::apply::ManagedFields::default();
        let Some(managed) =
            self.field_manager_update(ctx, kind, None, object, &none, options, &reset)
        else {
            return;
        };
        if managed.0.is_empty() {
            return;
        }
        if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
            metadata.insert("managedFields".into(), managed.to_value());
        }
    }

    /// The fields the main resource's updates do not own: the status, where the resource has a
    /// status subresource.
    fn status_reset(&self, ctx: &Ctx<'_, '_>) -> crate::apply::Set {
        let mut reset = crate::apply::Set::new();
        if self.registry.kind_ref(&ctx.gvr, "status").is_some() {
            reset.insert(&[crate::apply::PathElement::field("status")]);
        }
        reset
    }

    /// The entries the field manager's Update leaves: by the request's manager
    /// ([`field_manager`]) for its subresource, at the time it was received, from `managed`
    /// (the live object's entries); `None` when the kind has no Go type or the update fails.
    #[allow(clippy::too_many_arguments)]
    fn field_manager_update(
        &self,
        ctx: &Ctx<'_, '_>,
        kind: &GroupVersionKind,
        live: Option<&Value>,
        object: &Value,
        managed: &crate::apply::ManagedFields,
        options: Option<&Value>,
        reset: &crate::apply::Set,
    ) -> Option<crate::apply::ManagedFields> {
        let schema = crate::schema::Schema::for_release(self.registry.release());
        let id = schema.kind(&kind.group, &kind.version, &kind.kind)?;
        let time = received_at_seconds(ctx)?;
        let manager = field_manager(ctx, options);
        let api_version = kind.api_version();
        let req = crate::apply::Request {
            manager: &manager,
            api_version: &api_version,
            kind: &kind.kind,
            time: &time,
            force: false,
            subresource: &ctx.sub,
            reset_fields: (!reset.is_empty()).then_some(reset),
        };
        crate::apply::update(schema, id, live, object, &req, managed)
            .ok()
            .map(|(_, managed)| managed)
    }

    /// The `managedFields` the field manager's Update gives an updated object before admission,
    /// for the objects whose event does not show them:
    /// - a Scale (the scale subresource's `UpdatedObject` runs it on the Scales): the old Scale's
    ///   entries, as the ScaleHandler converted them, updated by the request's manager for
    ///   subresource `scale`;
    /// - the main resource when the event does not show the stored object (a denied update
    ///   answers a Status): from the entries in force
    ///   ([`crate::apply::ManagedFields::for_update`]: the request's own, else the old object's),
    ///   the fields the update changed become the request manager's, at the time the request was
    ///   received; the status is not the main resource's to own where the resource has a status
    ///   subresource.
    fn update_managed_fields(
        &self,
        ctx: &Ctx<'_, '_>,
        kind: &GroupVersionKind,
        object: &mut Value,
        old: &Value,
        options: Option<&Value>,
    ) {
        let (managed, reset) = match ctx.sub.as_str() {
            "scale" => (
                crate::apply::ManagedFields::from_object(old),
                crate::apply::Set::new(),
            ),
            "" => (
                crate::apply::ManagedFields::for_update(Some(old), object, ""),
                self.status_reset(ctx),
            ),
            _ => return,
        };
        let Ok(managed) = managed else {
            return;
        };
        let Some(managed) =
            self.field_manager_update(ctx, kind, Some(old), object, &managed, options, &reset)
        else {
            return;
        };
        set_managed_fields(object, &managed);
    }

    /// The request object of a create or update, parsed. (The field manager's entries are added
    /// by [`add_managed_fields`].)
    fn request_object(&self, ctx: &Ctx<'_, '_>) -> Result<Value, InputItem> {
        let Some(raw) = ctx.ev.request_object else {
            return Err(ctx.not_replayable(
                "requestObject",
                format!(
                    "request object not recorded: {} carries no request body for {}",
                    ctx.ev.level_text(),
                    ctx.what()
                ),
            ));
        };
        match scan::parse::<Value>(raw) {
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(_) => Err(InputItem::Invalid(InputProblem {
                source: ctx.source.clone(),
                field: "requestObject".into(),
                message: "expected an object".into(),
            })),
            Err(message) => Err(InputItem::Invalid(InputProblem {
                source: ctx.source.clone(),
                field: "requestObject".into(),
                message: super::relocate_from(message, &self.positions, ctx.ev.request_object_at),
            })),
        }
    }

    /// The kind admission saw: the registered kind of the resource, else the object's own.
    fn kind(
        &self,
        ctx: &Ctx<'_, '_>,
        objects: [Option<&Value>; 2],
    ) -> Result<GroupVersionKind, InputItem> {
        if let Some(k) = self.registry.kind_ref(&ctx.gvr, &ctx.sub) {
            return Ok(k.clone());
        }
        for obj in objects.into_iter().flatten() {
            let (Some(av), Some(kind)) = (
                obj.get("apiVersion").and_then(Value::as_str),
                obj.get("kind").and_then(Value::as_str),
            ) else {
                continue;
            };
            let (group, version) = av.split_once('/').unwrap_or(("", av));
            if !kind.is_empty() && !version.is_empty() {
                return Ok(GroupVersionKind::new(group, version, kind));
            }
        }
        Err(ctx.not_replayable(
            "objectRef.resource",
            format!(
                "kind unknown: {} is not a built-in resource and no object of it is known (add its CustomResourceDefinition)",
                ctx.what()
            ),
        ))
    }

    /// The stored object an update, patch or delete found (the parent object for `status` and
    /// other subresources of the same kind).
    fn old_object(&self, ctx: &Ctx<'_, '_>, name: &str, namespace: &str) -> Result<Value, String> {
        let scale = if ctx.sub == "scale" {
            Scalable::of(&self.registry, &ctx.gvr)
        } else {
            None
        };
        if !ctx.sub.is_empty() && scale.is_none() {
            let main = self.registry.kind_ref(&ctx.gvr, "");
            let sub = self.registry.kind_ref(&ctx.gvr, &ctx.sub);
            let same = match (main, sub) {
                (Some(m), Some(s)) => m == s,
                _ => ctx.sub == "status",
            };
            if !same {
                return Err(format!(
                    "old object unknown: the old object of {} is built by the apiserver from the stored object, which is not reproduced",
                    ctx.what()
                ));
            }
        }
        let key = store::key(&ctx.gvr.group, &ctx.gvr.resource, namespace, name);
        let Some(stored) = self.store.get(&key) else {
            return Err(format!(
                "old object unknown: {} was not seen earlier in the input nor in the --cluster files",
                ctx.what()
            ));
        };
        let want = GroupVersionKind::new(&ctx.gvr.group, &ctx.gvr.version, "").api_version();
        let parent = if stored.api_version() == want {
            stored.value()
        } else {
            // The apiserver reads the stored object in the request's version, converted as its
            // scheme converts it where the versions differ in shape (`schema::convert`).
            match self.converted(stored.value().as_ref(), &ctx.gvr) {
                Some(converted) => Some(converted),
                None => {
                    return Err(format!(
                        "old object unknown: {} is known only as {}, the request is for {want} (versions are not converted)",
                        ctx.what(),
                        stored.api_version()
                    ));
                }
            }
        };
        let parent = parent.ok_or_else(|| {
            format!(
                "old object unknown: the known state of {} is not valid JSON",
                ctx.what()
            )
        })?;
        if let Some(scale) = scale {
            return scale.scale_of(&parent, &ctx.gvr, REPLICAS_NOT_SET).ok_or_else(|| {
                format!(
                    "old object unknown: the stored object of {} cannot be read as a scalable object",
                    ctx.what()
                )
            });
        }
        Ok(parent)
    }

    /// A stored object of another version of the resource converted to the version of `gvr`,
    /// where the two versions differ in shape and the conversion is modelled.
    fn converted(&self, stored: Option<&Value>, gvr: &GroupVersionResource) -> Option<Value> {
        let stored = stored?;
        let api_version = stored.get("apiVersion").and_then(Value::as_str)?;
        let kind = stored.get("kind").and_then(Value::as_str)?;
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let from = GroupVersionKind::new(group, version, kind);
        let to = self.registry.kind_ref(gvr, "")?;
        let schema = crate::schema::Schema::for_release(self.registry.release());
        crate::schema::convert::convert(schema, stored, &from, to)
    }

    /// A create, or an update that created the object (`by_update`: the update handler neither
    /// clears system fields nor takes the name from the object).
    fn create(&self, ctx: &mut Ctx<'_, '_>, by_update: bool) -> InputItem {
        let mut object = match self.request_object(ctx) {
            Ok(o) => o,
            Err(item) => return item,
        };
        let kind = match self.kind(ctx, [Some(&object), None]) {
            Ok(k) => k,
            Err(item) => return item,
        };
        ensure_namespace(&mut object, &ctx.gvr, &ctx.namespace);
        // Only the subresources that take the UID as a precondition keep them
        // (`SubresourceObjectMetaPreserver`: pods/binding, serviceaccounts/token).
        let preserved = ctx.gvr.group.is_empty()
            && matches!(
                (ctx.gvr.resource.as_str(), ctx.sub.as_str()),
                ("pods", "binding") | ("serviceaccounts", "token")
            );
        if !preserved && !by_update {
            self.wipe_system_fields(&mut object, &ctx.gvr);
        }
        dedup_owner_references(&mut object);
        // On create the name comes from the object when the URL has none.
        let name = (ctx.name.is_empty() && ctx.sub.is_empty())
            .then(|| {
                object
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map(String::from)
            })
            .flatten();
        let options = query::write_options("CreateOptions", &ctx.query);
        self.request(
            ctx,
            Parts {
                operation: Operation::Create,
                kind,
                name,
                object: Some(object),
                old_object: None,
                options: Some(options),
                defaulted: false,
            },
        )
    }

    fn update(&self, ctx: &mut Ctx<'_, '_>) -> InputItem {
        let mut object = match self.request_object(ctx) {
            Ok(o) => o,
            Err(item) => return item,
        };
        let old = match self.old_object(ctx, &ctx.name, &ctx.namespace) {
            Ok(o) => o,
            Err(reason) => return ctx.not_replayable("", self.with_code(ctx, reason)),
        };
        let rv = |v: &Value| {
            v.pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from)
        };
        if let (Some(want), Some(have)) = (rv(&object), rv(&old))
            && want != have
        {
            return ctx.not_replayable(
                "requestObject.metadata.resourceVersion",
                format!(
                    "old object out of date: the update is based on resourceVersion {want}, the last state seen of {} is {have}",
                    ctx.what()
                ),
            );
        }
        ensure_namespace(&mut object, &ctx.gvr, &ctx.namespace);
        self.update_request(ctx, object, old, false)
    }

    /// The UPDATE an update or a patch is, once its new and old objects are known.
    fn update_request(
        &self,
        ctx: &Ctx<'_, '_>,
        mut object: Value,
        old: Value,
        defaulted: bool,
    ) -> InputItem {
        let kind = match self.kind(ctx, [Some(&object), Some(&old)]) {
            Ok(k) => k,
            Err(item) => return item,
        };
        dedup_owner_references(&mut object);
        let options = query::write_options("UpdateOptions", &ctx.query);
        if ctx.sub == "scale" && Scalable::of(&self.registry, &ctx.gvr).is_some() {
            self.update_managed_fields(ctx, &kind, &mut object, &old, Some(&options));
        }
        self.request(
            ctx,
            Parts {
                operation: Operation::Update,
                kind,
                name: None,
                object: Some(object),
                old_object: Some(old),
                options: Some(options),
                defaulted,
            },
        )
    }

    fn patch(&self, ctx: &mut Ctx<'_, '_>) -> InputItem {
        let Some(raw) = ctx.ev.request_object else {
            return ctx.not_replayable(
                "requestObject",
                format!(
                    "patch not recorded: {} carries no request body for {}",
                    ctx.ev.level_text(),
                    ctx.what()
                ),
            );
        };
        let body: Value = match scan::parse(raw) {
            Ok(v) => v,
            Err(message) => {
                return InputItem::Invalid(InputProblem {
                    source: ctx.source.clone(),
                    field: "requestObject".into(),
                    message,
                });
            }
        };
        let patch_type = match self.patch_type(ctx, &body) {
            Ok(t) => t,
            Err(reason) => return ctx.not_replayable("requestObject", reason),
        };
        if let PatchType::Apply(kind, created) = &patch_type {
            return self.server_side_apply(ctx, kind, *created, &body);
        }
        let old = match self.old_object(ctx, &ctx.name, &ctx.namespace) {
            Ok(o) => o,
            Err(reason) => return ctx.not_replayable("", self.with_code(ctx, reason)),
        };
        let patched = match patch_type {
            // Applies returned above.
            PatchType::Apply(..) => Err("a server-side apply".to_string()),
            PatchType::Json => crate::jsonpatch::decode(raw)
                .map_err(|e| e.message)
                .and_then(|p| p.apply_to_value(&old).map_err(|e| e.message)),
            PatchType::Merge => merge_patch(&old, &body).map_err(|e| e.to_string()),
            PatchType::Object(kind) => match self.object_patch(ctx, &kind, &old, &body) {
                Ok(Reading::Only(o)) => Ok(o),
                Ok(Reading::Told(o, note)) => {
                    ctx.notes.push(note);
                    Ok(o)
                }
                Ok(Reading::Unknown(reason)) => {
                    return ctx.not_replayable("requestObject", reason);
                }
                Err(e) => Err(e),
            },
        };
        let object = match patched {
            Ok(o) => o,
            Err(e) => {
                return ctx.not_replayable(
                    "requestObject",
                    format!(
                        "patch does not apply: {e} (applied to the last state seen of {}; the apiserver answered {})",
                        ctx.what(),
                        ctx.ev.code.map_or("nothing".to_string(), |c| c.to_string())
                    ),
                );
            }
        };
        let (object, defaulted) = self.decoded(ctx, object);
        self.update_request(ctx, object, old, defaulted)
    }

    /// The patched object as the patch handler holds it before admission: decoded into the
    /// kind's Go type and defaulted (kinds without one are left as they are).
    fn decoded(&self, ctx: &Ctx<'_, '_>, object: Value) -> (Value, bool) {
        match self.registry.kind_ref(&ctx.gvr, &ctx.sub) {
            Some(kind) => as_decoded(&self.registry, kind, &ctx.gvr, &ctx.sub, object),
            None => (object, false),
        }
    }

    /// Which patch the body is. The audit event does not record the Content-Type, so the type is
    /// told from what only one type can be; anything ambiguous is refused with the reason.
    fn patch_type(&self, ctx: &Ctx<'_, '_>, body: &Value) -> Result<PatchType, String> {
        let what = ctx.what();
        let obj = match body {
            Value::Array(_) => return Ok(PatchType::Json),
            Value::Object(m) => m,
            _ => {
                return Err(format!(
                    "patch type unknown: the patch body of {what} is neither a JSON patch (array) nor an object"
                ));
            }
        };
        let typed_as_apply = obj.contains_key("apiVersion") && obj.contains_key("kind");
        let created = ctx.ev.code == Some(201);
        let forced = ctx.query.first("force").is_some();
        // Only server-side apply creates with a patch or takes `force`; an object that names its
        // apiVersion and kind with a fieldManager is an apply configuration (a merge patch would
        // not repeat them).
        if created || forced || typed_as_apply && ctx.query.first("fieldManager").is_some() {
            let why = if created {
                format!("the patch created {what} (201), which only server-side apply does")
            } else if forced {
                format!("the request of {what} sets `force`, which only server-side apply accepts")
            } else {
                format!("the patch of {what} names apiVersion, kind and a fieldManager")
            };
            if let Some(kind) = self.builtin.kind_ref(&ctx.gvr, &ctx.sub) {
                return Ok(PatchType::Apply(kind.clone(), created));
            }
            return match (
                self.registry.custom_resource_schema(&ctx.gvr),
                self.registry.kind_ref(&ctx.gvr, &ctx.sub),
            ) {
                (Some(_), Some(kind)) => Ok(PatchType::Apply(kind.clone(), created)),
                (None, Some(_)) => Err(format!(
                    "apply patch: {why}; the CustomResourceDefinition of {} gives no schema for {}, which server-side apply needs",
                    ctx.gvr.resource, ctx.gvr.version
                )),
                (_, None) => Err(format!(
                    "apply patch: {why}; server-side apply of a custom resource needs its CustomResourceDefinition (add it with --cluster)"
                )),
            };
        }
        // Custom resources take no strategic merge patch (kube-apiserver answers 415).
        Ok(match self.builtin.kind_ref(&ctx.gvr, &ctx.sub) {
            Some(kind) => PatchType::Object(kind.clone()),
            None => PatchType::Merge,
        })
    }

    /// The Go types a built-in `kind` is patched and applied through: those of the release
    /// modelled, or, for a kind that release does not have (a log of a newer cluster), of the
    /// newest release that has it.
    fn typed_schema(&self, kind: &GroupVersionKind) -> &'static crate::schema::Schema {
        let modelled = crate::schema::Schema::for_release(self.registry.release());
        if modelled
            .kind(&kind.group, &kind.version, &kind.kind)
            .is_some()
        {
            modelled
        } else {
            crate::schema::Schema::for_release(self.builtin.release())
        }
    }

    /// A server-side apply: the object the field manager builds from the stored object (none when
    /// the apply creates it) and the apply configuration, with the `managedFields` it records,
    /// which is what admission sees. The manager is the request's `fieldManager`; the time is
    /// when the request was received.
    fn server_side_apply(
        &self,
        ctx: &mut Ctx<'_, '_>,
        kind: &GroupVersionKind,
        created: bool,
        config: &Value,
    ) -> InputItem {
        let what = ctx.what();
        let schema = self.typed_schema(kind);
        // The release modelled: its ObjectMeta, and its structured-merge-diff for custom resources.
        let release = self.registry.release();
        let modelled = crate::schema::Schema::for_release(release);
        // A built-in kind is typed by its Go type, a custom resource (itself or its `status`, not
        // its Scale) by its definition's schema.
        let own_kind = self.registry.kind_ref(&ctx.gvr, "") == Some(kind);
        let typed = match self.registry.custom_resource_schema(&ctx.gvr) {
            Some(openapi) if own_kind && self.builtin.kind_ref(&ctx.gvr, &ctx.sub).is_none() => {
                match crate::apply::CrdModel::new(modelled, &openapi) {
                    Ok(model) => Typed::Custom(model),
                    Err(e) => {
                        return ctx.not_replayable(
                            "requestObject",
                            format!(
                                "apply patch: the schema of {} in its CustomResourceDefinition cannot be read as the apiserver reads it: {e}",
                                ctx.gvr.resource
                            ),
                        );
                    }
                }
            }
            _ => match schema.kind(&kind.group, &kind.version, &kind.kind) {
                Some(id) => Typed::Go(id),
                None => {
                    return ctx.not_replayable(
                        "requestObject",
                        format!(
                            "apply patch: {} has no Go type in this release",
                            kind.api_version()
                        ),
                    );
                }
            },
        };
        let Some(manager) = ctx.query.first("fieldManager").map(String::from) else {
            return ctx.not_replayable(
                "requestURI",
                format!(
                    "no admission: the apply of {what} names no fieldManager, which apply requires (400)"
                ),
            );
        };
        let old = if created {
            None
        } else {
            match self.old_object(ctx, &ctx.name, &ctx.namespace) {
                Ok(o) => Some(o),
                Err(reason) => return ctx.not_replayable("", self.with_code(ctx, reason)),
            }
        };
        let time = received_at_seconds(ctx).unwrap_or_default();
        let managed = match old.as_ref().map(crate::apply::ManagedFields::from_object) {
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                return ctx.not_replayable("", format!("apply patch: {e} ({what})"));
            }
            None => crate::apply::ManagedFields::default(),
        };
        // What the resource's strategy resets: `status` on the resource itself where there is a
        // status subresource; `spec` and `metadata` on the status subresource.
        let mut reset = crate::apply::Set::new();
        let field = crate::apply::PathElement::field;
        if ctx.sub == "status" {
            reset.insert(&[field("spec")]);
            reset.insert(&[field("metadata")]);
        } else if ctx.sub.is_empty() && self.registry.kind_ref(&ctx.gvr, "status").is_some() {
            reset.insert(&[field("status")]);
        }
        let api_version = kind.api_version();
        let req = crate::apply::Request {
            manager: &manager,
            api_version: &api_version,
            kind: &kind.kind,
            time: &time,
            force: ctx.query.first("force") == Some("true"),
            subresource: &ctx.sub,
            reset_fields: (!reset.is_empty()).then_some(&reset),
        };
        let applied = match &typed {
            Typed::Go(id) => crate::apply::apply(schema, *id, old.as_ref(), config, &req, &managed),
            Typed::Custom(model) => {
                crate::apply::apply_custom(model, release, old.as_ref(), config, &req, &managed)
            }
        };
        let (mut object, managed) = match applied {
            Ok(r) => r,
            Err(e) => {
                return ctx.not_replayable(
                        "requestObject",
                        format!(
                            "no admission: the apply of {what} fails before admission: {e} (the apiserver answered {})",
                            ctx.ev.code.map_or("nothing".to_string(), |c| c.to_string())
                        ),
                    );
            }
        };
        if let Some(Value::Object(meta)) = object.get_mut("metadata") {
            meta.insert("managedFields".into(), managed.to_value());
        }
        ensure_namespace(&mut object, &ctx.gvr, &ctx.namespace);
        match old {
            Some(old) => self.update_request(ctx, object, old, false),
            None => {
                let options = query::write_options("CreateOptions", &ctx.query);
                self.request(
                    ctx,
                    Parts {
                        operation: Operation::Create,
                        kind: kind.clone(),
                        name: None,
                        object: Some(object),
                        old_object: None,
                        options: Some(options),
                        defaulted: false,
                    },
                )
            }
        }
    }

    /// An object patch of a built-in kind: a merge patch or a strategic merge patch, which the
    /// audit event does not tell apart. Both are applied; when they give the same object that is
    /// the answer; when only one applies, or only one agrees with the object the apiserver
    /// answered, that one; otherwise the reason why neither can be chosen.
    fn object_patch(
        &self,
        ctx: &Ctx<'_, '_>,
        kind: &GroupVersionKind,
        old: &Value,
        body: &Value,
    ) -> Result<Reading, String> {
        let schema = self.typed_schema(kind);
        let Some(id) = schema.kind(&kind.group, &kind.version, &kind.kind) else {
            return merge_patch(old, body)
                .map(Reading::Only)
                .map_err(|e| e.to_string());
        };
        let node = crate::schema::patchmeta::PatchNode::new(schema, id);
        let strategic =
            crate::strategicpatch::strategic_merge_patch(old.clone(), body.clone(), &node)
                .map_err(|e| e.to_string());
        let what = ctx.what();
        // Only a strategic merge patch has $-directives (kubectl never sends them otherwise).
        if has_directive(body) {
            return strategic.map(Reading::Only);
        }
        let merge = merge_patch(old, body).map_err(|e| e.to_string());
        let (s, m) = match (strategic, merge) {
            (Ok(s), Ok(m)) => (s, m),
            (Ok(s), Err(_)) => return Ok(Reading::Only(s)),
            (Err(_), Ok(m)) => return Ok(Reading::Only(m)),
            (Err(e), Err(_)) => return Err(e),
        };
        if s == m {
            return Ok(Reading::Only(s));
        }
        let response = ctx
            .ev
            .response_object
            .and_then(|r| scan::parse::<Value>(r).ok());
        let Some(response) = response.filter(|r| r.get("metadata").is_some()) else {
            return Ok(Reading::Unknown(format!(
                "patch type unknown: the object patch of {what} gives different objects as a merge patch and as a strategic merge patch, and the audit event records neither the content type nor the object that resulted ({})",
                ctx.ev.level_text()
            )));
        };
        // The response is the object after the strategy, which dropped what a disabled
        // feature gate guards: compare the readings as it would leave them.
        let prepared = |reading: &Value| {
            let mut reading = reading.clone();
            crate::engine::strategy::drop_disabled(
                self.registry.release(),
                &ctx.gvr.group,
                &ctx.gvr.resource,
                &mut reading,
                Some(old),
            );
            reading
        };
        let (sp, mp) = (prepared(&s), prepared(&m));
        match (agrees(&sp, &response, body), agrees(&mp, &response, body)) {
            (true, false) => Ok(Reading::Told(
                s,
                "patch type not recorded: read as a strategic merge patch, the only reading the resulting object agrees with".into(),
            )),
            (false, true) => Ok(Reading::Told(
                m,
                "patch type not recorded: read as a merge patch, the only reading the resulting object agrees with".into(),
            )),
            _ => Ok(Reading::Unknown(format!(
                "patch type unknown: the object patch of {what} gives different objects as a merge patch and as a strategic merge patch, and the resulting object agrees with {} of them where the patch writes",
                if agrees(&sp, &response, body) { "both" } else { "neither" }
            ))),
        }
    }

    fn delete(&self, ctx: &mut Ctx<'_, '_>) -> InputItem {
        let old = match self.old_object(ctx, &ctx.name, &ctx.namespace) {
            Ok(o) => o,
            Err(reason) => return ctx.not_replayable("", self.with_code(ctx, reason)),
        };
        let kind = match self.kind(ctx, [Some(&old), None]) {
            Ok(k) => k,
            Err(item) => return item,
        };
        let mut options = match delete_options(ctx) {
            Ok(o) => o,
            Err(item) => return item,
        };
        if let Err(reason) = before_delete(&mut options, &ctx.gvr, &ctx.sub, &old) {
            return ctx.not_replayable("", format!("no admission: {reason} ({})", ctx.what()));
        }
        self.request(
            ctx,
            Parts {
                operation: Operation::Delete,
                kind,
                name: None,
                object: None,
                old_object: Some(old),
                options: Some(Value::Object(options)),
                defaulted: false,
            },
        )
    }

    /// One DELETE per deleted item (upstream calls admission per item, with an empty name and the
    /// request's options).
    fn delete_collection(&self, ctx: &mut Ctx<'_, '_>) -> Vec<InputItem> {
        let ev = ctx.ev;
        if !ev.succeeded() {
            return vec![ctx.not_replayable(
                "responseStatus.code",
                format!(
                    "deleted items not recorded: the deletecollection of {} failed ({}), so which items reached admission is unknown",
                    ctx.gvr.resource,
                    ev.code.map_or("no code".into(), |c| c.to_string())
                ),
            )];
        }
        let items = ev
            .response_object
            .and_then(|r| scan::parse::<Value>(r).ok())
            .and_then(|mut v| v.get_mut("items").map(Value::take))
            .and_then(|v| match v {
                Value::Array(a) => Some(a),
                _ => None,
            });
        let Some(items) = items else {
            return vec![ctx.not_replayable(
                "responseObject",
                format!(
                    "deleted items not recorded: {} has no list of the items deleted by the deletecollection of {}",
                    ev.level_text(),
                    ctx.gvr.resource
                ),
            )];
        };
        let options = match delete_options(ctx) {
            Ok(o) => o,
            Err(item) => return vec![item],
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let name = item
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let namespace = item
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or(&ctx.namespace);
            let old = match self.old_object(ctx, name, namespace) {
                Ok(o) => o,
                Err(reason) => {
                    out.push(ctx.not_replayable(
                        "responseObject.items",
                        format!("{reason} (item {namespace}/{name})"),
                    ));
                    continue;
                }
            };
            let kind = match self.kind(ctx, [Some(&old), None]) {
                Ok(k) => k,
                Err(item) => {
                    out.push(item);
                    continue;
                }
            };
            out.push(self.request(
                ctx,
                Parts {
                    operation: Operation::Delete,
                    kind,
                    name: Some(String::new()),
                    object: None,
                    old_object: Some(old),
                    options: Some(Value::Object(options.clone())),
                    defaulted: false,
                },
            ));
        }
        out
    }

    fn connect(&self, ctx: &mut Ctx<'_, '_>) -> InputItem {
        let Some(kind) = self.registry.kind_ref(&ctx.gvr, &ctx.sub).cloned() else {
            return ctx.not_replayable(
                "objectRef.subresource",
                format!(
                    "kind unknown: {} is not registered for this release",
                    ctx.what()
                ),
            );
        };
        let object =
            match connect_options(&kind, &ctx.sub, &ctx.ev.uri, &ctx.gvr.resource, &ctx.name) {
                Ok(o) => o,
                Err(reason) => {
                    return ctx.not_replayable(
                        "requestURI",
                        format!("connect options unreadable: {reason}"),
                    );
                }
            };
        ctx.notes.push(format!(
            "the {} object was rebuilt from the request URI",
            kind.kind
        ));
        self.request(
            ctx,
            Parts {
                operation: Operation::Connect,
                kind,
                name: None,
                object: Some(object),
                old_object: None,
                options: None,
                defaulted: false,
            },
        )
    }

    /// Adds what the apiserver answered to an "old object unknown" reason when that explains it.
    fn with_code(&self, ctx: &Ctx<'_, '_>, reason: String) -> String {
        match ctx.ev.code {
            Some(404) => format!(
                "{reason}; the apiserver answered 404 NotFound, so admission was probably never reached"
            ),
            _ => reason,
        }
    }

    /// `rest.WipeObjectMetaSystemFields`: `uid`, the deletion fields and `selfLink` go; a set
    /// creation timestamp becomes the zero time, which Go writes as `null` in typed objects and
    /// leaves out of custom resources (whose metadata goes through `ObjectMeta`, where a `null`
    /// one, as clients send it, is the zero time too).
    fn wipe_system_fields(&self, object: &mut Value, gvr: &GroupVersionResource) {
        let typed = self.builtin.kind_ref(gvr, "").is_some();
        let Some(Value::Object(meta)) = object.get_mut("metadata") else {
            return;
        };
        if !typed {
            meta.remove("creationTimestamp");
        } else if meta.get("creationTimestamp").is_some_and(|v| !v.is_null()) {
            meta.insert("creationTimestamp".into(), Value::Null);
        }
        for k in [
            "uid",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(k);
        }
    }

    /// After an event is handled: what its response says about the objects it wrote.
    /// After a successful write of a built-in `scale` subresource, the stored parent as the
    /// scale's `UpdatedObject` leaves it: the new replicas and resourceVersion, the generation
    /// bumped when the replicas changed, and the Scale's `managedFields` folded back
    /// ([`crate::apply::scale::to_parent`]).
    fn learn_scale(&mut self, ev: &Event<'_>, oref: &ObjectRef<'_>) {
        let version = if oref.api_version.is_empty() {
            match self
                .registry
                .preferred_version(&oref.api_group, &oref.resource)
            {
                Some(gvr) => gvr.version,
                None => return,
            }
        } else {
            oref.api_version.to_string()
        };
        let gvr = GroupVersionResource::new(&oref.api_group, &version, &oref.resource);
        let Some(scalable) = Scalable::of(&self.registry, &gvr) else {
            return;
        };
        let Some(Ok(mut new_scale)) = ev.response_object.map(scan::parse::<Value>) else {
            return;
        };
        let ctx = Ctx {
            ev,
            source: SourceRef {
                file: String::new(),
                index: 0,
                unit: crate::replay::IndexUnit::Line,
                audit_id: None,
                line: None,
            },
            gvr: gvr.clone(),
            sub: "scale".into(),
            namespace: oref.namespace.to_string(),
            name: oref.name.to_string(),
            query: Query::of_uri(&ev.uri),
            notes: Vec::new(),
        };
        let key = store::key(&gvr.group, &gvr.resource, &ctx.namespace, &ctx.name);
        let Some(mut parent) = self.store.get(&key).and_then(|s| s.value()) else {
            return;
        };
        let Some(old_scale) = scalable.scale_of(&parent, &gvr, REPLICAS_NOT_SET) else {
            return;
        };
        let kind = GroupVersionKind::new("autoscaling", "v1", "Scale");
        let options = query::write_options("UpdateOptions", &ctx.query);
        self.update_managed_fields(&ctx, &kind, &mut new_scale, &old_scale, Some(&options));
        let replicas = new_scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let changed = scalable.spec_replicas(&parent) != Ok(Some(replicas));
        let parent_version = GroupVersionKind::new(&gvr.group, &gvr.version, "").api_version();
        let managed = (
            crate::apply::ManagedFields::from_object(&parent),
            crate::apply::ManagedFields::from_object(&new_scale),
        );
        let (Ok(parent_managed), Ok(scale_managed)) = managed else {
            return;
        };
        let folded = crate::apply::scale::to_parent(
            &parent_managed,
            &scale_managed,
            &parent_version,
            &scalable.mapping,
        );
        scalable.set_spec_replicas(&mut parent, replicas);
        let rv = new_scale.pointer("/metadata/resourceVersion").cloned();
        if let Some(Value::Object(meta)) = parent.get_mut("metadata") {
            if let Some(rv) = rv {
                meta.insert("resourceVersion".into(), rv);
            }
            if changed {
                let generation = meta.get("generation").and_then(Value::as_i64).unwrap_or(0);
                meta.insert("generation".into(), Value::from(generation + 1));
            }
            if folded.0.is_empty() {
                meta.remove("managedFields");
            } else {
                meta.insert("managedFields".into(), folded.to_value());
            }
        }
        let Ok(text) = serde_json::to_vec(&parent) else {
            return;
        };
        if let Some(m) = store::meta(&text, (0, text.len())) {
            self.store
                .put(&gvr.group, &gvr.resource, &text, (0, text.len()), &m, None);
        }
    }

    fn learn_write(&mut self, ev: &Event<'_>, oref: &ObjectRef<'_>) {
        if !ev.succeeded() || Query::of_uri(&ev.uri).first("dryRun").is_some() {
            return;
        }
        let deleting = matches!(ev.verb.as_str(), "delete" | "deletecollection");
        if deleting
            && ev.request_object.is_some_and(|r| {
                crate::json::from_slice::<Value>(r).is_ok_and(|v| query::is_dry_run(&v))
            })
        {
            return;
        }
        let (group, resource) = (&*oref.api_group, &*oref.resource);
        if oref.subresource == "scale" && matches!(ev.verb.as_str(), "update" | "patch") {
            return self.learn_scale(ev, oref);
        }
        let main_kind = self
            .registry
            .kind_ref(
                &GroupVersionResource::new(group, &oref.api_version, resource),
                "",
            )
            .map(|k| k.kind.clone());
        let response = ev.response_object;
        let whole = |t: &[u8]| (0, t.len());
        match ev.verb.as_str() {
            "create" | "update" | "patch" => {
                let Some(t) = response else { return };
                let Some(m) = store::meta(t, whole(t)) else {
                    return;
                };
                let same_kind = match &main_kind {
                    Some(k) => *k == m.kind,
                    None => m.kind != "Status" && matches!(&*oref.subresource, "" | "status"),
                };
                if same_kind {
                    self.store.put(group, resource, t, whole(t), &m, None);
                }
            }
            "delete" => {
                let kept = response.and_then(|t| store::meta(t, whole(t)).map(|m| (t, m)));
                match kept {
                    Some((t, m)) if m.deleting && m.kind != "Status" => {
                        self.store.put(group, resource, t, whole(t), &m, None);
                    }
                    _ => self
                        .store
                        .remove(group, resource, &oref.namespace, &oref.name),
                }
            }
            "deletecollection" => {
                let Some(t) = response else { return };
                let Ok([items]) = scan::find(t, whole(t), [b"items"]) else {
                    return;
                };
                let Some(items) = items else { return };
                let mut gone = Vec::new();
                let store = &mut self.store;
                let _ = scan::elements(t, items, |_, item| {
                    if let Some(m) = store::meta(t, item) {
                        if m.deleting {
                            store.put(group, resource, t, item, &m, None);
                        } else {
                            gone.push((m.namespace, m.name));
                        }
                    }
                });
                for (ns, name) in gone {
                    self.store.remove(group, resource, &ns, &name);
                }
            }
            _ => {}
        }
    }

    /// Keeps the latest early stage of `audit_id`; returns its sequence number, and that of the
    /// earlier stage it replaces.
    fn remember_pending(
        &mut self,
        audit_id: String,
        stage: String,
        text: &[u8],
        source: SourceRef,
    ) -> (u64, Option<u64>) {
        self.seq += 1;
        let replaced = self.pending.insert(
            audit_id,
            super::Pending {
                seq: self.seq,
                stage,
                text: text.into(),
                source,
            },
        );
        (self.seq, replaced.map(|p| p.seq))
    }
}

/// What differs between the requests built from an event.
struct Parts {
    operation: Operation,
    kind: GroupVersionKind,
    /// `None`: the objectRef's name.
    name: Option<String>,
    object: Option<Value>,
    old_object: Option<Value>,
    options: Option<Value>,
    /// Whether `object` was decoded into its kind's Go type and defaulted here.
    defaulted: bool,
}

enum PatchType {
    Json,
    Merge,
    /// An object patch of a built-in kind: merge or strategic merge.
    Object(GroupVersionKind),
    /// A server-side apply configuration of a built-in kind; true when it created the object.
    Apply(GroupVersionKind, bool),
}

/// What an object patch of a built-in kind is read as.
enum Reading {
    /// The only object the patch can give.
    Only(Value),
    /// The one reading the evidence points to, with a note saying so.
    Told(Value, String),
    /// Neither reading can be chosen: why.
    Unknown(String),
}

/// Whether `candidate` and the object the apiserver answered agree wherever `patch` writes
/// (webhooks may have changed the rest).
fn agrees(candidate: &Value, response: &Value, patch: &Value) -> bool {
    let Value::Object(p) = patch else {
        return candidate == response;
    };
    p.iter().filter(|(k, _)| !k.starts_with('$')).all(|(k, v)| {
        let (c, r) = (candidate.get(k), response.get(k));
        match v {
            Value::Object(_) => agrees(c.unwrap_or(&Value::Null), r.unwrap_or(&Value::Null), v),
            _ => c.filter(|c| !c.is_null()) == r.filter(|r| !r.is_null()),
        }
    })
}

/// True when a strategic-merge directive (`$patch`, `$retainKeys`, `$setElementOrder/…`,
/// `$deleteFromPrimitiveList/…`) appears anywhere.
fn has_directive(v: &Value) -> bool {
    match v {
        Value::Object(m) => m
            .iter()
            .any(|(k, v)| k.starts_with('$') || has_directive(v)),
        Value::Array(a) => a.iter().any(has_directive),
        _ => false,
    }
}

/// `rest.EnsureObjectNamespaceMatchesRequestNamespace` with the expected namespace of the
/// resource (none for Namespaces).
fn ensure_namespace(object: &mut Value, gvr: &GroupVersionResource, request_ns: &str) {
    let expected = if gvr.group.is_empty() && gvr.resource == "namespaces" {
        ""
    } else {
        request_ns
    };
    let Some(Value::Object(meta)) = object.get_mut("metadata") else {
        return;
    };
    let current = meta
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if short_eq(current, expected) {
        return;
    }
    if current.is_empty() {
        meta.insert("namespace".into(), json!(expected));
    } else if expected.is_empty() {
        meta.remove("namespace");
    }
}

/// `dedupOwnerReferences`: the first owner reference of each UID is kept.
fn dedup_owner_references(object: &mut Value) {
    let Some(Value::Array(refs)) = object.pointer_mut("/metadata/ownerReferences") else {
        return;
    };
    let mut seen = std::collections::HashSet::new();
    refs.retain(|r| {
        let uid = r
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        seen.insert(uid)
    });
}

/// The DeleteOptions the handler decoded: from the body when one was recorded, else from the
/// query (with a note when a body may have gone unrecorded).
fn delete_options(ctx: &mut Ctx<'_, '_>) -> Result<Map<String, Value>, InputItem> {
    if let Some(raw) = ctx.ev.request_object {
        return match scan::parse::<Value>(raw) {
            Ok(Value::Object(body)) => Ok(query::delete_options_from_body(&body)),
            _ => Err(InputItem::Invalid(InputProblem {
                source: ctx.source.clone(),
                field: "requestObject".into(),
                message: "expected DeleteOptions".into(),
            })),
        };
    }
    if !ctx.ev.body_recorded() {
        ctx.notes.push(format!(
            "DeleteOptions taken from the request URI: {} does not record whether a body carried them",
            ctx.ev.level_text()
        ));
    }
    query::delete_options_from_query(&ctx.query).map_err(|e| {
        ctx.not_replayable(
            "requestURI",
            format!("no admission: the apiserver refuses {e}"),
        )
    })
}

/// What `rest.BeforeDelete` (and the pod strategy's `CheckGracefulDelete`) do to the options
/// before admission sees them. `Err`: the apiserver answers without calling admission.
fn before_delete(
    options: &mut Map<String, Value>,
    gvr: &GroupVersionResource,
    sub: &str,
    old: &Value,
) -> Result<(), String> {
    let grace = |o: &Map<String, Value>| o.get("gracePeriodSeconds").and_then(Value::as_i64);
    if grace(options).is_some_and(|g| g < 0) {
        options.insert("gracePeriodSeconds".into(), json!(1));
    }
    if !(gvr.group.is_empty() && gvr.resource == "pods" && sub.is_empty()) {
        return Ok(());
    }
    let meta = old.get("metadata");
    if meta
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|t| !t.is_null())
    {
        let pending = meta
            .and_then(|m| m.get("deletionGracePeriodSeconds"))
            .and_then(Value::as_i64)
            .map(|g| if g < 0 { 1 } else { g });
        let Some(pending) = pending.filter(|&g| g != 0) else {
            return Ok(());
        };
        return match grace(options) {
            Some(g) if g < pending => Ok(()),
            Some(_) => Err("the pod's graceful deletion is already pending with a grace period no longer than requested".into()),
            None => Err("the pod's graceful deletion is already pending".into()),
        };
    }
    let spec = old.get("spec");
    let mut period = grace(options)
        .or_else(|| {
            spec.and_then(|s| s.get("terminationGracePeriodSeconds"))
                .and_then(Value::as_i64)
        })
        .unwrap_or(0);
    if spec
        .and_then(|s| s.get("nodeName"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .is_empty()
    {
        period = 0;
    }
    if matches!(
        old.pointer("/status/phase").and_then(Value::as_str),
        Some("Failed" | "Succeeded")
    ) {
        period = 0;
    }
    if period < 0 {
        period = 1;
    }
    options.insert("gracePeriodSeconds".into(), json!(period));
    Ok(())
}

/// The connect options object admission sees (`PodExecOptions`, …), decoded from the request
/// URI by the parameter codec: query values, and for proxies the path after the subresource.
fn connect_options(
    kind: &GroupVersionKind,
    sub: &str,
    uri: &str,
    resource: &str,
    name: &str,
) -> Result<Value, String> {
    let mut q = Query::of_uri(uri);
    let mut m = Map::new();
    m.insert("kind".into(), json!(kind.kind));
    m.insert("apiVersion".into(), json!(kind.api_version()));
    if sub == "proxy" {
        let path = query::uri_path(uri).ok_or("malformed escape in the path")?;
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let at = parts
            .windows(3)
            .position(|w| w[0] == resource && w[1] == name && w[2] == sub)
            .ok_or("the path does not name the proxied object")?;
        let mut p = parts[at + 3..].join("/");
        if !p.is_empty() && !p.starts_with('/') {
            p.insert(0, '/');
        }
        if path.ends_with('/') && !p.ends_with('/') {
            p.push('/');
        }
        q = Query::of_uri(&format!("?path={}", escape_query(&p)));
    }
    if q.is_empty() {
        if sub == "exec" {
            m.insert("command".into(), Value::Null);
        }
        return Ok(Value::Object(m));
    }
    match sub {
        "exec" | "attach" => {
            for key in ["stdin", "stdout", "stderr", "tty"] {
                if q.first(key).is_some_and(query::go_bool) {
                    m.insert(key.into(), json!(true));
                }
            }
            if let Some(c) = q.first("container").filter(|c| !c.is_empty()) {
                m.insert("container".into(), json!(c));
            }
            if sub == "exec" {
                let command: Vec<&str> = q.all("command").collect();
                m.insert(
                    "command".into(),
                    if command.is_empty() {
                        Value::Null
                    } else {
                        json!(command)
                    },
                );
            }
        }
        "portforward" => {
            let mut ports = Vec::new();
            for v in q.all("ports") {
                for p in v.split(',') {
                    let n: i32 = p
                        .trim()
                        .parse()
                        .map_err(|_| format!("ports: invalid port {p:?}"))?;
                    ports.push(n);
                }
            }
            if !ports.is_empty() {
                m.insert("ports".into(), json!(ports));
            }
        }
        _ => {
            if let Some(p) = q.first("path").filter(|p| !p.is_empty()) {
                m.insert("path".into(), json!(p));
            }
        }
    }
    Ok(Value::Object(m))
}

fn escape_query(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The manager the field manager records a write under: the request's `fieldManager`, else the
/// first word of its user agent (at most 128 characters).
fn field_manager(ctx: &Ctx<'_, '_>, options: Option<&Value>) -> String {
    options
        .and_then(|o| o.get("fieldManager"))
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .map(String::from)
        .unwrap_or_else(|| {
            let agent = ctx.ev.user_agent.as_deref().unwrap_or_default();
            agent
                .split('/')
                .next()
                .unwrap_or_default()
                .chars()
                .take(128)
                .collect()
        })
}

/// How kube-apiserver builds the Scale of a scalable resource and writes it back: the built-in
/// workloads read `spec.replicas`, `status.replicas` and `spec.selector`; a custom resource the
/// paths its definition's `subresources.scale` names (upstream `scaleFromCustomResource`).
struct Scalable {
    /// Where the parent's `managedFields` entries own the replicas, per API version.
    mapping: crate::apply::scale::ReplicasPaths,
    /// A custom resource's paths, for the version of the request.
    custom: Option<crate::registry::ScalePaths>,
}

/// `spec.replicas` of a custom resource's old Scale when its replicas field is not set
/// (upstream's `invalidSpecReplicas`, the smallest int32): what mutating webhooks see.
const REPLICAS_NOT_SET: i64 = i32::MIN as i64;

impl Scalable {
    /// The built-in workloads, or a custom resource with a scale subresource in `registry`.
    fn of(
        registry: &crate::registry::ResourceRegistry,
        gvr: &GroupVersionResource,
    ) -> Option<Scalable> {
        use crate::apply::scale::ReplicasPaths;
        use crate::registry::ScalePaths;
        let builtin = |mapping| {
            Some(Scalable {
                mapping,
                custom: None,
            })
        };
        match (gvr.group.as_str(), gvr.resource.as_str()) {
            ("apps", "deployments" | "statefulsets" | "replicasets") => {
                builtin(ReplicasPaths::apps())
            }
            ("", "replicationcontrollers") => builtin(ReplicasPaths::core()),
            (group, resource) => {
                let versions = registry.custom_resource(group, resource)?;
                let paths = versions
                    .iter()
                    .find(|v| v.name == gvr.version)?
                    .scale
                    .clone()?;
                let mapping = ReplicasPaths::custom(
                    group,
                    versions.iter().map(|v| {
                        let fields = v
                            .scale
                            .as_ref()
                            .map(|p| ScalePaths::fields(&p.spec_replicas).collect());
                        (v.name.as_str(), fields)
                    }),
                );
                Some(Scalable {
                    mapping,
                    custom: Some(paths),
                })
            }
        }
    }

    /// The parent's replicas: `Ok(None)` when not set, `Err` when the field cannot be read as
    /// the apiserver reads it (an integer).
    fn spec_replicas(&self, parent: &Value) -> Result<Option<i64>, ()> {
        match &self.custom {
            None => Ok(parent.pointer("/spec/replicas").and_then(Value::as_i64)),
            Some(paths) => nested_int(parent, &paths.spec_replicas),
        }
    }

    /// Sets the parent's replicas (upstream `SetNestedField`: missing maps are created).
    fn set_spec_replicas(&self, parent: &mut Value, replicas: i64) {
        let fields: Vec<&str> = match &self.custom {
            None => vec!["spec", "replicas"],
            Some(paths) => crate::registry::ScalePaths::fields(&paths.spec_replicas).collect(),
        };
        let Some((last, parents)) = fields.split_last() else {
            return;
        };
        let mut cur = parent;
        for f in parents {
            let Value::Object(map) = cur else {
                return;
            };
            cur = map
                .entry(f.to_string())
                .or_insert_with(|| Value::Object(Default::default()));
        }
        if let Value::Object(map) = cur {
            map.insert(last.to_string(), Value::from(replicas));
        }
    }

    /// The Scale kube-apiserver builds from a stored scalable object (`scaleFromDeployment` and
    /// its siblings in each registry, `scaleFromCustomResource`): name, namespace, uid,
    /// resourceVersion and creationTimestamp, the replicas, the status replicas, the selector as
    /// a string, and the parent's `managedFields` of the replicas as the ScaleHandler converts
    /// them. A custom resource without its replicas field gets `not_set` as its replicas.
    fn scale_of(&self, parent: &Value, gvr: &GroupVersionResource, not_set: i64) -> Option<Value> {
        let (replicas, status_replicas, selector) = match &self.custom {
            None => {
                let selector = parent.pointer("/spec/selector");
                let selector = if gvr.group.is_empty() {
                    crate::selector::set_string(selector)?
                } else {
                    crate::selector::label_selector_string(selector)?
                };
                let int = |p: &str| parent.pointer(p).and_then(Value::as_i64).unwrap_or(0);
                (int("/spec/replicas"), int("/status/replicas"), selector)
            }
            Some(paths) => {
                let replicas = nested_int(parent, &paths.spec_replicas).ok()?;
                let status = nested_int(parent, &paths.status_replicas).ok()?;
                let selector = match &paths.label_selector {
                    Some(path) => match nested(parent, path).ok()? {
                        None => String::new(),
                        Some(Value::String(s)) => s.clone(),
                        Some(_) => return None,
                    },
                    None => String::new(),
                };
                // Go's int32 conversions.
                let int32 = |v: i64| i64::from(v as i32);
                (
                    replicas.map_or(not_set, int32),
                    int32(status.unwrap_or(0)),
                    selector,
                )
            }
        };
        let meta = parent.get("metadata")?.as_object()?;
        let mut metadata = serde_json::Map::new();
        for key in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
        ] {
            if let Some(v) = meta.get(key) {
                metadata.insert(key.into(), v.clone());
            }
        }
        let managed = crate::apply::ManagedFields::from_object(parent).ok()?;
        let converted = crate::apply::scale::to_subresource(&managed, &self.mapping);
        if !converted.0.is_empty() {
            metadata.insert("managedFields".into(), converted.to_value());
        }
        let mut spec = serde_json::Map::new();
        if replicas != 0 {
            spec.insert("replicas".into(), Value::from(replicas));
        }
        let mut status = serde_json::Map::new();
        status.insert("replicas".into(), Value::from(status_replicas));
        if !selector.is_empty() {
            status.insert("selector".into(), Value::from(selector));
        }
        Some(serde_json::json!({
            "kind": "Scale",
            "apiVersion": crate::apply::scale::SCALE_API_VERSION,
            "metadata": metadata,
            "spec": spec,
            "status": status,
        }))
    }
}

/// The value at a custom resource's dotted `path` (upstream `NestedFieldNoCopy`): `Ok(None)`
/// when a field on the way is missing, `Err` when something on the way is not an object.
fn nested<'v>(object: &'v Value, path: &str) -> Result<Option<&'v Value>, ()> {
    let mut cur = object;
    for field in crate::registry::ScalePaths::fields(path) {
        match cur {
            Value::Object(map) => match map.get(field) {
                Some(v) => cur = v,
                None => return Ok(None),
            },
            _ => return Err(()),
        }
    }
    Ok(Some(cur))
}

/// An integer at `path` (upstream `NestedInt64`): anything but an integer there is an error.
fn nested_int(object: &Value, path: &str) -> Result<Option<i64>, ()> {
    match nested(object, path)? {
        None => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or(()),
    }
}

/// When the request was received, at the second precision `managedFields` times have.
fn received_at_seconds(ctx: &Ctx<'_, '_>) -> Option<String> {
    let received = crate::schema::codec::parse_rfc3339(ctx.ev.received.as_deref()?).ok()?;
    received.format_seconds()
}

/// The `managedFields` the apiserver's field manager gave the object before admission, which
/// the request body does not carry: those of the object the event's response shows (the stored
/// object; mutating admission does not change them). Nothing when the response is not the
/// object (a Status) or the request brought entries of its own (other than the old object's).
/// Sets the object's `managedFields` to `managed`, or removes them when there are none.
fn set_managed_fields(object: &mut Value, managed: &crate::apply::ManagedFields) {
    if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
        if managed.0.is_empty() {
            metadata.remove("managedFields");
        } else {
            metadata.insert("managedFields".into(), managed.to_value());
        }
    }
}

/// The `managedFields` of the event's response, when it is an object that has them (not a
/// Status, not absent).
fn response_managed_fields(response: Option<&[u8]>) -> Option<Value> {
    #[derive(Deserialize)]
    struct Response {
        metadata: Option<Metadata>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Metadata {
        managed_fields: Option<Value>,
    }
    scan::parse::<Response>(response?)
        .ok()?
        .metadata?
        .managed_fields
        .filter(Value::is_array)
}

fn response_has_managed_fields(ev: &Event<'_>) -> bool {
    response_managed_fields(ev.response_object).is_some()
}

/// An object of `kind` (the kind the registry serves `gvr` as) as the apiserver holds it once a
/// handler has decoded it: in the kind's Go type and defaulted, as its codec does. A custom
/// resource is defaulted by its definition's schema when the definition is known, and otherwise
/// left as it is; so is an object whose decode or defaulting fails. Returned with whether it was
/// decoded into a built-in kind's Go type and defaulted.
pub(super) fn as_decoded(
    registry: &crate::registry::ResourceRegistry,
    kind: &GroupVersionKind,
    gvr: &GroupVersionResource,
    sub: &str,
    mut object: Value,
) -> (Value, bool) {
    let release = registry.release();
    let schema = crate::schema::Schema::for_release(release);
    let Some(id) = schema.kind(&kind.group, &kind.version, &kind.kind) else {
        // A custom resource is decoded by its definition's codec, which applies the schema's
        // defaults (a field the patch removed or set to null comes back).
        let crd = registry
            .custom_resource_schema(gvr)
            .filter(|_| matches!(sub, "" | "status"));
        if let Some(model) = crd.and_then(|c| crate::apply::CrdModel::new(schema, &c).ok()) {
            model.default_object(&mut object);
        }
        return (object, false);
    };
    let before = object.clone();
    let normalized = crate::schema::codec::normalize_in_place(schema, id, &mut object).is_ok();
    if normalized
        && crate::defaulting::default_object(
            &kind.group,
            &kind.version,
            &kind.kind,
            &mut object,
            release,
        )
        && crate::schema::codec::normalize_in_place(schema, id, &mut object).is_err()
    {
        return (before, false);
    }
    if normalized {
        (object, true)
    } else {
        (before, false)
    }
}

fn add_managed_fields(object: &mut Value, response: Option<&[u8]>, old: Option<&Value>) {
    let Some(Value::Object(metadata)) = object.get_mut("metadata") else {
        return;
    };
    // Entries the request brought itself are the field manager's to judge; those an update or
    // patch kept from the old object are replaced by what the field manager made of them.
    if let Some(own) = metadata.get("managedFields").filter(|m| !m.is_null())
        && old.is_none_or(|old| old != own)
    {
        return;
    }
    if let Some(entries) = response_managed_fields(response) {
        metadata.insert("managedFields".into(), entries);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_index_knows_every_key() {
        for (i, k) in KEYS.iter().enumerate() {
            assert_eq!(key_index(k), Some(i), "{}", String::from_utf8_lossy(k));
        }
        for other in [&b"kinds"[..], b"", b"Kind", b"requestObjects", b"metadata"] {
            assert_eq!(key_index(other), None);
        }
    }
}

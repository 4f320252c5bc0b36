//! Building the AdmissionReview sent to a webhook, and reading what came back: client-go's HTTP
//! handling followed by upstream's `VerifyAdmissionResponse`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::attributes::Attributes;
use super::call::{ReplyOutcome, TransportError};
use super::matching::Invocation;
use super::status;
use super::trace::MatchTexts;
use crate::api::admission::{
    AdmissionRequest, AdmissionResponse, AdmissionReviewReply, AdmissionReviewRequest,
};
use crate::api::meta::short_eq;
use crate::api::{GroupVersionKind, GroupVersionResource, Operation, Status, UserInfo};
use crate::scan;

/// The first of `admissionReviewVersions` that is `v1` or `v1beta1`.
pub fn negotiate_version(versions: Option<&[String]>) -> Option<&'static str> {
    versions?.iter().find_map(|v| match v.as_str() {
        "v1" => Some("v1"),
        "v1beta1" => Some("v1beta1"),
        _ => None,
    })
}

/// Sets `apiVersion`/`kind` to `to` when the object is labelled `from`: an equivalent match of a
/// version that differs from the request's only in label (`schema::convert` converts the others).
pub fn relabel(o: &Value, from: &GroupVersionKind, to: &GroupVersionKind) -> Value {
    let mut o = o.clone();
    if let Some(m) = o.as_object_mut() {
        let labelled_from = m.get("kind").and_then(Value::as_str) == Some(from.kind.as_str())
            && m.get("apiVersion").and_then(Value::as_str) == Some(from.api_version().as_str());
        if labelled_from {
            m.insert("apiVersion".into(), Value::String(to.api_version()));
            m.insert("kind".into(), Value::String(to.kind.clone()));
        }
    }
    o
}

/// The AdmissionReview for one call, serialised as the apiserver writes it.
pub fn build_review(
    attrs: &Attributes,
    invocation: &Invocation,
    object: Value,
    old_object: Value,
    uid: &str,
    version: &str,
) -> AdmissionReviewRequest {
    AdmissionReviewRequest {
        kind: "AdmissionReview".into(),
        api_version: format!("admission.k8s.io/{version}"),
        request: AdmissionRequest {
            uid: uid.into(),
            kind: GroupVersionKind::clone(&invocation.kind),
            resource: GroupVersionResource::clone(&invocation.resource),
            sub_resource: invocation.sub_resource.clone(),
            request_kind: Some(GroupVersionKind::clone(&attrs.kind)),
            request_resource: Some(GroupVersionResource::clone(&attrs.resource)),
            request_sub_resource: attrs.sub_resource.clone(),
            name: attrs.name.clone(),
            namespace: attrs.namespace.clone(),
            operation: attrs.operation.as_str().into(),
            user_info: (*attrs.user_info).clone(),
            object,
            old_object,
            dry_run: attrs.dry_run,
            options: attrs.options.as_deref().cloned().unwrap_or(Value::Null),
        },
    }
}

/// The AdmissionReview [`build_review`] describes, written as kube-apiserver writes it (the
/// options in their Go type's field order, a newline at the end), with the objects spliced in
/// already serialised: a dispatch serialises its current object once per change instead of
/// cloning and serialising it for every call.
pub fn review_body(
    attrs: &Attributes,
    invocation: &Invocation,
    object: &RawValue,
    old_object: &RawValue,
    uid: &str,
    version: &str,
    release: crate::KubeVersion,
) -> String {
    let head = request_head(attrs, invocation);
    let tail = request_tail(attrs, release);
    review_text(
        version,
        uid,
        &[&head],
        object.get(),
        old_object.get(),
        &tail,
    )
}

const REVIEW_START: &str = "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/";
const REVIEW_UID: &str = "\",\"request\":{\"uid\":";
const REVIEW_OLD_OBJECT: &str = ",\"oldObject\":";

/// An AdmissionReview from its parts: `head` (the pieces of [`request_head`], in order) and
/// `tail` from [`request_tail`], the objects as serialised JSON. Its capacity is its length, so
/// that it becomes a `Bytes` body without another allocation.
pub(crate) fn review_text(
    version: &str,
    uid: &str,
    head: &[&str],
    object: &str,
    old_object: &str,
    tail: &str,
) -> String {
    let len = REVIEW_START.len()
        + version.len()
        + REVIEW_UID.len()
        + json_str_len(uid)
        + head.iter().map(|piece| piece.len()).sum::<usize>()
        + object.len()
        + REVIEW_OLD_OBJECT.len()
        + old_object.len()
        + tail.len()
        + 1;
    let mut out = String::with_capacity(len);
    out.push_str(REVIEW_START);
    out.push_str(version);
    out.push_str(REVIEW_UID);
    push_json_str(&mut out, uid);
    for piece in head {
        out.push_str(piece);
    }
    out.push_str(object);
    out.push_str(REVIEW_OLD_OBJECT);
    out.push_str(old_object);
    out.push_str(tail);
    // Go's `json.Encoder` ends what it encodes with a newline.
    out.push('\n');
    out
}

/// The length of `s` as serde_json writes it.
fn json_str_len(s: &str) -> usize {
    if scan::needs_json_escape(s.as_bytes()) {
        serde_json::to_string(s).map_or(0, |t| t.len())
    } else {
        s.len() + 2
    }
}

/// An object (`null` when absent) as serialised into AdmissionReview bodies.
pub(crate) fn object_json(object: Option<&Value>) -> String {
    // Serialising a JSON value cannot fail.
    serde_json::to_string(&object).unwrap_or_default()
}

/// An object (`null` when absent) as kube-apiserver serialises it into AdmissionReview bodies:
/// Go's encoding of the kind's type when it is a built-in kind of `release`, otherwise the map an
/// unstructured object is (members sorted by key).
pub(crate) fn typed_object_json(
    object: Option<&Value>,
    kind: &GroupVersionKind,
    release: crate::KubeVersion,
) -> String {
    let schema = crate::schema::Schema::for_release(release);
    match (object, schema.kind(&kind.group, &kind.version, &kind.kind)) {
        (Some(o), Some(id)) => {
            crate::schema::encode(schema, id, o).unwrap_or_else(|_| object_json(Some(o)))
        }
        _ => object_json(object),
    }
}

/// [`typed_object_json`] of a request's object: a derived object (one with a few members
/// replaced) is encoded from its members, without making it whole first.
pub(crate) fn typed_object_text(
    object: Option<&super::object::Object>,
    kind: &GroupVersionKind,
    release: crate::KubeVersion,
) -> String {
    if let Some(o) = object.filter(|o| o.members_only()) {
        let schema = crate::schema::Schema::for_release(release);
        if let Some(id) = schema.kind(&kind.group, &kind.version, &kind.kind)
            && let Ok(text) = crate::schema::codec::encode_members(schema, id, |n| o.member(n))
        {
            return text;
        }
    }
    let schema = crate::schema::Schema::for_release(release);
    match (object, schema.kind(&kind.group, &kind.version, &kind.kind)) {
        (Some(o), Some(id)) => o.typed_text(schema, id, || {
            crate::schema::codec::encode_with_places(schema, id, o.value()).unwrap_or_else(|_| {
                crate::schema::codec::Encoding::text_only(object_json(Some(o.value())))
            })
        }),
        _ => object_json(object.map(super::object::Object::value)),
    }
}

/// A string as serde_json writes it.
fn push_json_str(out: &mut String, s: &str) {
    // serde_json escapes quotes, backslashes and control characters, nothing else.
    if !scan::needs_json_escape(s.as_bytes()) {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        // Serialising a string cannot fail.
        out.push_str(&serde_json::to_string(s).unwrap_or_default());
    }
}

/// The part of `request` between `uid` and the object: `,"kind":…,"userInfo":{…},"object":`.
/// It depends only on the request and the invocation, so calls share it.
pub(crate) fn request_head(attrs: &Attributes, invocation: &Invocation) -> String {
    request_head_pieces(attrs, invocation).concat()
}

/// [`request_head`] in three pieces (`AdmissionReviewRequest`'s fields after `uid` and before
/// `object`, in the wire type's order and with its omissions; the tests compare the two): the
/// kinds and resources (`,"kind":…`, the same for the requests of one kind), the names
/// (`,"name":…,"namespace":…`, the request's own, empty when both are) and the rest
/// (`,"operation":…,"userInfo":{…},"object":`, the same for the requests of one user and
/// operation), so that what repeats from request to request can be shared.
pub(crate) fn request_head_pieces(attrs: &Attributes, invocation: &Invocation) -> [String; 3] {
    [
        request_kinds(attrs, invocation),
        request_names(attrs),
        request_user(attrs),
    ]
}

/// The fields of a serialised object, after a comma (empty when it has none).
fn fields<T: Serialize>(v: &T) -> String {
    // Serialising borrowed strings cannot fail.
    let mut text = serde_json::to_string(v).unwrap_or_else(|_| "{}".into());
    if text == "{}" {
        return String::new();
    }
    text.replace_range(..1, ",");
    text.pop();
    text
}

fn is_empty(s: &&str) -> bool {
    s.is_empty()
}

/// The kinds piece of [`request_head_pieces`].
pub(crate) fn request_kinds(attrs: &Attributes, invocation: &Invocation) -> String {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Kinds<'a> {
        kind: &'a GroupVersionKind,
        resource: &'a GroupVersionResource,
        #[serde(skip_serializing_if = "is_empty")]
        sub_resource: &'a str,
        request_kind: &'a GroupVersionKind,
        request_resource: &'a GroupVersionResource,
        #[serde(skip_serializing_if = "is_empty")]
        request_sub_resource: &'a str,
    }
    fields(&Kinds {
        kind: &invocation.kind,
        resource: &invocation.resource,
        sub_resource: &invocation.sub_resource,
        request_kind: &attrs.kind,
        request_resource: &attrs.resource,
        request_sub_resource: &attrs.sub_resource,
    })
}

/// The names piece of [`request_head_pieces`].
pub(crate) fn request_names(attrs: &Attributes) -> String {
    let mut out = String::with_capacity(attrs.name.len() + attrs.namespace.len() + 32);
    if !attrs.name.is_empty() {
        out.push_str(",\"name\":");
        push_json_str(&mut out, &attrs.name);
    }
    if !attrs.namespace.is_empty() {
        out.push_str(",\"namespace\":");
        push_json_str(&mut out, &attrs.namespace);
    }
    out
}

/// The user piece of [`request_head_pieces`], up to the object.
pub(crate) fn request_user(attrs: &Attributes) -> String {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct User<'a> {
        operation: &'a str,
        user_info: &'a UserInfo,
    }
    let mut user = fields(&User {
        operation: attrs.operation.as_str(),
        user_info: &attrs.user_info,
    });
    user.push_str(",\"object\":");
    user
}

/// The pieces of review text (and the texts of `Matched` steps, by invocation) that repeat from
/// request to request, found again without being written: the kinds by value, the user piece by
/// the operation and the user, the tail by dry run and the options' allocation (the reader shares
/// options; equal JSON values can be written differently: `0.0` and `-0.0`). The most recent few
/// of each are kept.
#[derive(Debug, Default)]
pub(crate) struct PieceCache {
    kinds: VecDeque<(Box<KindsKey>, Arc<str>)>,
    users: VecDeque<(Operation, Arc<UserInfo>, Arc<str>)>,
    tails: VecDeque<(bool, Option<Arc<Value>>, Arc<str>)>,
    matches: VecDeque<(Box<Invocation>, Arc<MatchTexts>)>,
}

/// What the kinds piece is made of.
#[derive(Debug)]
struct KindsKey {
    kind: Arc<GroupVersionKind>,
    resource: Arc<GroupVersionResource>,
    sub_resource: String,
    request_kind: Arc<GroupVersionKind>,
    request_resource: Arc<GroupVersionResource>,
    request_sub_resource: String,
}

/// Pieces of each sort a [`PieceCache`] keeps.
const RECENT_PIECES: usize = 8;

/// The same user: the same allocation (the reader shares users), or equal (which for a user's
/// strings means written alike).
fn same(a: &Arc<UserInfo>, b: &Arc<UserInfo>) -> bool {
    Arc::ptr_eq(a, b) || **a == **b
}

fn keep<T>(list: &mut VecDeque<T>, entry: T) {
    if list.len() >= RECENT_PIECES {
        list.pop_back();
    }
    list.push_front(entry);
}

impl PieceCache {
    /// The kinds piece of `attrs` and `invocation`, when known.
    pub(crate) fn kinds(&self, attrs: &Attributes, invocation: &Invocation) -> Option<Arc<str>> {
        self.kinds.iter().find_map(|(k, text)| {
            (k.kind == invocation.kind
                && k.resource == invocation.resource
                && short_eq(&k.sub_resource, &invocation.sub_resource)
                && k.request_kind == attrs.kind
                && k.request_resource == attrs.resource
                && short_eq(&k.request_sub_resource, &attrs.sub_resource))
            .then(|| Arc::clone(text))
        })
    }

    /// Remembers the kinds piece of `attrs` and `invocation`.
    pub(crate) fn remember_kinds(
        &mut self,
        attrs: &Attributes,
        invocation: &Invocation,
        text: Arc<str>,
    ) {
        let key = KindsKey {
            kind: Arc::clone(&invocation.kind),
            resource: Arc::clone(&invocation.resource),
            sub_resource: invocation.sub_resource.clone(),
            request_kind: attrs.kind.clone(),
            request_resource: attrs.resource.clone(),
            request_sub_resource: attrs.sub_resource.clone(),
        };
        keep(&mut self.kinds, (Box::new(key), text));
    }

    /// The user piece of `attrs`, when known.
    pub(crate) fn user(&self, attrs: &Attributes) -> Option<Arc<str>> {
        self.users.iter().find_map(|(op, user, text)| {
            (*op == attrs.operation && same(user, &attrs.user_info)).then(|| Arc::clone(text))
        })
    }

    /// Remembers the user piece of `attrs`.
    pub(crate) fn remember_user(&mut self, attrs: &Attributes, text: Arc<str>) {
        keep(
            &mut self.users,
            (attrs.operation, Arc::clone(&attrs.user_info), text),
        );
    }

    /// The tail of `attrs`, when known.
    pub(crate) fn tail(&self, attrs: &Attributes) -> Option<Arc<str>> {
        self.tails.iter().find_map(|(dry_run, options, text)| {
            let same_options = match (options, &attrs.options) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            (*dry_run == attrs.dry_run && same_options).then(|| Arc::clone(text))
        })
    }

    /// What a `Matched` step shows for `invocation`, when known.
    pub(crate) fn match_texts(&self, invocation: &Invocation) -> Option<Arc<MatchTexts>> {
        self.matches.iter().find_map(|(known, texts)| {
            (known.kind == invocation.kind
                && known.resource == invocation.resource
                && short_eq(&known.sub_resource, &invocation.sub_resource))
            .then(|| Arc::clone(texts))
        })
    }

    /// Remembers what a `Matched` step shows for `invocation`.
    pub(crate) fn remember_match_texts(&mut self, invocation: &Invocation, texts: Arc<MatchTexts>) {
        keep(&mut self.matches, (Box::new(invocation.clone()), texts));
    }

    /// Remembers the tail of `attrs`.
    pub(crate) fn remember_tail(&mut self, attrs: &Attributes, text: Arc<str>) {
        keep(
            &mut self.tails,
            (attrs.dry_run, attrs.options.clone(), text),
        );
    }
}

/// The end of the review after `oldObject`: `,"dryRun":…,"options":…}}`. Calls share it.
pub(crate) fn request_tail(attrs: &Attributes, release: crate::KubeVersion) -> String {
    let mut text = String::with_capacity(64);
    text.push_str(if attrs.dry_run {
        ",\"dryRun\":true,\"options\":"
    } else {
        ",\"dryRun\":false,\"options\":"
    });
    // The options are `CreateOptions`, `UpdateOptions` or `DeleteOptions` of meta.k8s.io/v1.
    let options = attrs.options.as_deref();
    let kind = options
        .and_then(|o| o.get("kind"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    text.push_str(&typed_object_json(
        options,
        &GroupVersionKind::new("meta.k8s.io", "v1", kind),
        release,
    ));
    text.push_str("}}");
    text
}

/// A failure to obtain a usable response: upstream's `ErrCallingWebhook` reason and the status
/// that goes into metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct CallingError {
    /// The reason, e.g. `failed to call webhook: Post "…": context deadline exceeded`.
    pub reason: String,
    /// The status code recorded in metrics.
    pub status: Status,
    /// The reason wraps `context.Canceled`.
    pub canceled: bool,
}

impl CallingError {
    fn new(reason: String, status: Status) -> Self {
        Self {
            reason,
            status,
            canceled: false,
        }
    }
}

/// A verified webhook response.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Verified {
    /// The verdict.
    pub allowed: bool,
    /// The webhook's status (used for denials).
    pub result: Option<Status>,
    /// Patch bytes.
    pub patch: Option<Vec<u8>>,
    /// Patch type after v1beta1 normalisation.
    pub patch_type: Option<String>,
    /// auditAnnotations.
    pub audit_annotations: BTreeMap<String, String>,
    /// warnings.
    pub warnings: Vec<String>,
}

/// Interprets one reply: transport and HTTP failures, decoding, then verification.
pub fn interpret_reply(
    outcome: &ReplyOutcome,
    url: &str,
    request_uid: &str,
    version: &str,
    mutating: bool,
    release: crate::KubeVersion,
) -> Result<Verified, CallingError> {
    if version == "v1"
        && let ReplyOutcome::Http {
            status,
            body,
            content_type,
        } = outcome
        && ((200..=206).contains(status) || *status == 101)
        // client-go parses the media type first: a reply it cannot parse is an error, however
        // plain its body.
        && content_type
            .as_deref()
            .is_none_or(|c| c.is_empty() || c == "application/json" || parse_media_type(c).is_ok())
        && let Some(allowed) =
            canonical_v1_verdict(body, request_uid).or_else(|| plain_v1_verdict(body, request_uid))
    {
        return Ok(Verified {
            allowed,
            ..Verified::default()
        });
    }
    decoded_reply(outcome, url, request_uid, version, mutating, release)
}

/// [`interpret_reply`] without the plain-reply shortcut: decoding, then verification.
fn decoded_reply(
    outcome: &ReplyOutcome,
    url: &str,
    request_uid: &str,
    version: &str,
    mutating: bool,
    release: crate::KubeVersion,
) -> Result<Verified, CallingError> {
    let review = decode_reply(outcome, url, version, release)?;
    verify(review, request_uid, version, mutating).map_err(|m| {
        CallingError::new(
            format!("received invalid webhook response: {m}"),
            status::service_unavailable("error validating webhook response"),
        )
    })
}

fn transport_reason(url: &str, e: &TransportError) -> String {
    // client-go reports a failed body read without the url.Error wrapper; a failure after a
    // redirect comes wrapped already, with the URL Go names (the hop's, or the `Location`).
    if e.detail
        .starts_with("unexpected error when reading response body")
        || e.detail.starts_with("Post \"")
    {
        return format!("failed to call webhook: {}", e.detail);
    }
    format!(
        "failed to call webhook: Post {}: {}",
        status::go_quote(url),
        e.detail
    )
}

/// The status a calling error carries when client-go's `Do().Into()` fails with an error that is
/// not an API status (transport failures, an empty or undecodable reply): `ServiceUnavailable`
/// (503) from Kubernetes 1.34, `BadRequest` (400) before. Only metric label values show it; the
/// client's error is the same.
pub fn call_failure_status(release: crate::KubeVersion) -> Status {
    if release.at_least(34) {
        status::service_unavailable("error calling webhook")
    } else {
        status::bad_request("error calling webhook")
    }
}

/// The status a calling error carries when the webhook's REST client cannot be built (`err`, the
/// client builder's error): `InternalError` (500) from Kubernetes 1.34, `BadRequest` (400)
/// before. Only metric label values show it.
pub fn rest_client_status(release: crate::KubeVersion, err: &str) -> Status {
    if release.at_least(34) {
        status::internal_error(err)
    } else {
        status::bad_request("error getting REST client")
    }
}

/// client-go's `Do().Into()` for the webhook client.
fn decode_reply(
    outcome: &ReplyOutcome,
    url: &str,
    version: &str,
    release: crate::KubeVersion,
) -> Result<AdmissionReviewReply, CallingError> {
    let (code, content_type, body) = match outcome {
        ReplyOutcome::Http {
            status,
            content_type,
            body,
        } => (*status, content_type.as_deref(), body.as_slice()),
        ReplyOutcome::ClientConfig(msg) => {
            return Err(CallingError::new(
                format!("could not get REST client: {msg}"),
                rest_client_status(release, msg),
            ));
        }
        ReplyOutcome::Transport(e) => {
            return Err(CallingError::new(
                transport_reason(url, e),
                call_failure_status(release),
            ));
        }
        ReplyOutcome::Canceled => {
            let mut e = CallingError::new(
                format!(
                    "failed to call webhook: Post {}: context canceled",
                    status::go_quote(url)
                ),
                call_failure_status(release),
            );
            e.canceled = true;
            return Err(e);
        }
        ReplyOutcome::Panicked(p) => {
            return Err(CallingError::new(
                format!("panic while calling webhook: {p}"),
                status::internal_error(p),
            ));
        }
    };
    let content_type = content_type
        .filter(|c| !c.is_empty())
        .unwrap_or("application/json");
    // client-go parses the media type before looking at the status; a parse error is an
    // internal error (an API status) in every release.
    if content_type != "application/json"
        && let Err(e) = parse_media_type(content_type)
    {
        let s = status::internal_error(e);
        return Err(CallingError::new(
            format!("failed to call webhook: {}", s.message),
            s,
        ));
    }
    if !(200..=206).contains(&code) && code != 101 {
        if let Some(s) = failure_status_in_body(body) {
            return Err(CallingError::new(
                format!("failed to call webhook: {}", s.message),
                s,
            ));
        }
        let is_text = match content_type.split(';').next().map(str::trim) {
            Some(media) if !media.is_empty() => media.starts_with("text/"),
            _ => true,
        };
        let message = if is_text {
            let capped = &body[..body.len().min(2048)];
            String::from_utf8_lossy(capped).trim().to_string()
        } else {
            "unknown".to_string()
        };
        let s = status::generic_server_response(code, &message);
        return Err(CallingError::new(
            format!("failed to call webhook: {}", s.message),
            s,
        ));
    }
    // Whatever the decoder refuses is a plain error, not an API status.
    let undecodable = |detail: String| {
        CallingError::new(
            format!("failed to call webhook: {detail}"),
            call_failure_status(release),
        )
    };
    if body.is_empty() {
        return Err(undecodable(format!(
            "0-length response with status code: {code} and content type: {content_type}"
        )));
    }
    // The common case decodes straight into the wire type. Whatever that path would not read
    // exactly as decoding a `Value` first does (duplicate fields, any error) takes the general
    // path below, which has the exact error texts.
    if let Some(review) =
        plain_reply(body).or_else(|| crate::json::from_slice::<AdmissionReviewReply>(body).ok())
    {
        let api_version = review.api_version.as_deref().unwrap_or("");
        let kind = review.kind.as_deref().unwrap_or("");
        return match kind_error(api_version, kind, version, body, release) {
            Some(detail) => Err(undecodable(detail)),
            None => Ok(review),
        };
    }
    let raw = reply_value(body).map_err(undecodable)?;
    let (api_version, kind) = type_meta(&raw)
        .map_err(|e| undecodable(format!("couldn't get version/kind; json parse error: {e}")))?;
    if let Some(detail) = kind_error(api_version, kind, version, body, release) {
        return Err(undecodable(detail));
    }
    if raw.is_null() {
        return Ok(AdmissionReviewReply::default());
    }
    serde_json::from_value::<AdmissionReviewReply>(raw)
        .map_err(|e| undecodable(format!("json: {e}")))
}

/// Go's `mime.ParseMediaType`: the media type, or its error.
fn parse_media_type(v: &str) -> Result<String, &'static str> {
    fn is_token_char(c: char) -> bool {
        c.is_ascii() && c > ' ' && c != '\u{7f}' && !"()<>@,;:\\\"/[]?=".contains(c)
    }
    fn token(v: &str) -> (&str, &str) {
        let end = v.find(|c| !is_token_char(c)).unwrap_or(v.len());
        v.split_at(end)
    }
    /// A parameter value: a quoted string or a token; None when there is none.
    fn value(v: &str) -> Option<(String, &str)> {
        let Some(quoted) = v.strip_prefix('"') else {
            let (t, rest) = token(v);
            return (!t.is_empty()).then(|| (t.to_string(), rest));
        };
        let mut out = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => return Some((out, &quoted[i + 1..])),
                '\\' if quoted[i + 1..]
                    .chars()
                    .next()
                    .is_some_and(|n| "()<>@,;:\\\"/[]?=".contains(n)) =>
                {
                    if let Some((_, n)) = chars.next() {
                        out.push(n);
                    }
                }
                '\r' | '\n' => return None,
                c => out.push(c),
            }
        }
        None
    }
    let base = v.split(';').next().unwrap_or_default();
    let media = base.to_lowercase().trim().to_string();
    let (typ, rest) = token(&media);
    if typ.is_empty() {
        return Err("mime: no media type");
    }
    if !rest.is_empty() {
        let Some(rest) = rest.strip_prefix('/') else {
            return Err("mime: expected slash after first token");
        };
        let (subtype, rest) = token(rest);
        if subtype.is_empty() {
            return Err("mime: expected token after slash");
        }
        if !rest.is_empty() {
            return Err("mime: unexpected content after media subtype");
        }
    }
    let mut params: BTreeMap<String, String> = BTreeMap::new();
    let mut v = &v[base.len()..];
    loop {
        v = v.trim_start();
        if v.is_empty() {
            break;
        }
        let param = v.strip_prefix(';').and_then(|r| {
            let (key, r) = token(r.trim_start());
            let r = r.trim_start().strip_prefix('=')?;
            let (value, r) = value(r.trim_start())?;
            (!key.is_empty()).then(|| (key.to_lowercase(), value, r))
        });
        let Some((key, value, rest)) = param else {
            if v.trim() == ";" {
                break;
            }
            return Err("mime: invalid media parameter");
        };
        // Parameters with a `*` (continuations) are kept apart per base name.
        let slot = match key.split_once('*') {
            Some((base, _)) => format!("{base}\u{0}{key}"),
            None => key,
        };
        if params.get(&slot).is_some_and(|old| *old != value) {
            return Err("mime: duplicate parameter name");
        }
        params.insert(slot, value);
        v = rest;
    }
    Ok(media)
}

/// A reply's body as the webhook client's decoder reads it: as JSON when it starts with `{`
/// (after whitespace), otherwise as YAML converted to JSON (apimachinery's YAML serializer, which
/// the decoder tries for data its JSON serializer does not recognise), or the decoder's error. A
/// body that is YAML to neither reader keeps the JSON reader's error.
fn reply_value(body: &[u8]) -> Result<Value, String> {
    let json_error = |e: serde_json::Error| {
        format!(
            "couldn't get version/kind; json parse error: {}",
            go_json_error(&e, body)
        )
    };
    let starts_object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if !starts_object
        && let Some(v) = std::str::from_utf8(body)
            .ok()
            .and_then(|text| serde_saphyr::from_str::<Value>(text).ok())
    {
        return Ok(v);
    }
    crate::json::from_slice(body).map_err(json_error)
}

/// The group of AdmissionReview.
const ADMISSION_GROUP: &str = "admission.k8s.io";

/// `apiVersion` and `kind` as apimachinery's `SimpleMetaFactory.Interpret` reads them from a
/// reply (`null` members and a `null` reply read as empty), or Go's `json.Unmarshal` error.
fn type_meta(raw: &Value) -> Result<(&str, &str), String> {
    const FIND_KIND: &str = r#"struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#;
    let go_type = crate::api::admission::go_json_type;
    let map = match raw {
        Value::Null => return Ok(("", "")),
        Value::Object(map) => map,
        other => {
            return Err(format!(
                "json: cannot unmarshal {} into Go value of type {FIND_KIND}",
                go_type(other)
            ));
        }
    };
    let member = |name: &str| match map.get(name) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s.as_str()),
        Some(other) => Err(format!(
            "json: cannot unmarshal {} into Go struct field .{name} of type string",
            go_type(other)
        )),
    };
    Ok((member("apiVersion")?, member("kind")?))
}

/// The name of the scheme the webhook client decodes replies with, as apimachinery names a scheme:
/// the file and line of `runtime.NewScheme()` in `k8s.io/apiserver/pkg/util/webhook/client.go`
/// (line 69 in 1.28.3; 71 in 1.30.0, 1.31.2 and 1.33.3, which the other releases are taken to
/// share).
fn hook_scheme_name(release: crate::KubeVersion) -> &'static str {
    if release.at_least(29) {
        "k8s.io/apiserver/pkg/util/webhook/client.go:71"
    } else {
        "k8s.io/apiserver/pkg/util/webhook/client.go:69"
    }
}

/// The Go type the webhook client's scheme decodes `group/version, Kind=kind` into: the two
/// AdmissionReview versions with the types `metav1.AddToGroupVersion` registers beside them, and
/// the unversioned types, which any group and version name.
fn registered_type(group: &str, version: &str, kind: &str) -> Option<String> {
    const UNVERSIONED: [&str; 5] = [
        "Status",
        "APIVersions",
        "APIGroupList",
        "APIGroup",
        "APIResourceList",
    ];
    const OPTIONS: [&str; 6] = [
        "ListOptions",
        "GetOptions",
        "DeleteOptions",
        "CreateOptions",
        "UpdateOptions",
        "PatchOptions",
    ];
    if group == ADMISSION_GROUP {
        match (version, kind) {
            ("v1" | "v1beta1", "AdmissionReview") => return Some(format!("{version}.{kind}")),
            ("v1" | "v1beta1", "WatchEvent") => return Some("v1.WatchEvent".into()),
            ("v1" | "v1beta1", k) if OPTIONS.contains(&k) => return Some(format!("v1.{k}")),
            ("__internal", "WatchEvent") => return Some("v1.InternalEvent".into()),
            _ => {}
        }
    }
    UNVERSIONED.contains(&kind).then(|| format!("v1.{kind}"))
}

/// Why the webhook client's decoder refuses a reply labelled `api_version`/`kind` when it
/// decodes into the AdmissionReview version `sent` (apimachinery's JSON serializer, then the
/// versioning codec's conversion); None when the reply decodes into it. A missing `kind`, or a
/// missing `apiVersion`, is taken from the AdmissionReview sent.
fn kind_error(
    api_version: &str,
    kind: &str,
    sent: &str,
    body: &[u8],
    release: crate::KubeVersion,
) -> Option<String> {
    let (mut group, mut version) = if api_version.is_empty() || api_version == "/" {
        ("", "")
    } else {
        match api_version.matches('/').count() {
            0 => ("", api_version),
            1 => api_version.split_once('/').unwrap_or(("", api_version)),
            _ => return Some(format!("unexpected GroupVersion string: {api_version}")),
        }
    };
    let kind = if kind.is_empty() {
        "AdmissionReview"
    } else {
        kind
    };
    if version.is_empty() && (group.is_empty() || group == ADMISSION_GROUP) {
        (group, version) = (ADMISSION_GROUP, sent);
    }
    if version.is_empty() {
        return Some(format!(
            "Object 'apiVersion' is missing in '{}'",
            String::from_utf8_lossy(body)
        ));
    }
    if group == ADMISSION_GROUP && version == sent && kind == "AdmissionReview" {
        return None;
    }
    let scheme = status::go_quote(hook_scheme_name(release));
    Some(match registered_type(group, version, kind) {
        Some(ty) => format!("converting ({ty}) to ({sent}.AdmissionReview): unknown conversion"),
        None if version == "__internal" => format!(
            "no kind {} is registered for the internal version of group {} in scheme {scheme}",
            status::go_quote(kind),
            status::go_quote(group)
        ),
        None => {
            let gv = if group.is_empty() {
                version.to_string()
            } else {
                format!("{group}/{version}")
            };
            format!(
                "no kind {} is registered for version {} in scheme {scheme}",
                status::go_quote(kind),
                status::go_quote(&gv)
            )
        }
    })
}

/// A reply of the plain shape most webhooks send — `apiVersion`, `kind` and a `response` holding
/// only `uid` and `allowed`, each member once, strings without escapes — read field by field;
/// None for anything else, which decoding the wire type then reads. Where this gives a reply,
/// that decoding gives the same.
fn plain_reply(body: &[u8]) -> Option<AdmissionReviewReply> {
    let p = plain_parts(body)?;
    Some(AdmissionReviewReply {
        api_version: p.api_version.map(str::to_owned),
        kind: p.kind.map(str::to_owned),
        response: p.response.map(|(uid, allowed)| AdmissionResponse {
            uid: uid.unwrap_or_default().to_owned(),
            allowed: allowed.unwrap_or_default(),
            ..AdmissionResponse::default()
        }),
    })
}

/// The verdict of a plain reply (see [`plain_reply`]) to a v1 review that passes every check
/// [`verify`] makes (`admission.k8s.io/v1`, `AdmissionReview`, the request's uid), read without
/// building the reply; None for any other reply.
fn plain_v1_verdict(body: &[u8], request_uid: &str) -> Option<bool> {
    let p = plain_parts(body)?;
    let (uid, allowed) = p.response?;
    (p.api_version == Some("admission.k8s.io/v1")
        && p.kind == Some("AdmissionReview")
        && uid == Some(request_uid))
    .then_some(allowed.unwrap_or_default())
}

/// The verdict of a plain v1 reply written byte for byte as Go's `encoding/json` writes an
/// `AdmissionReview` (`kind` first) or with `apiVersion` first, compact, for `request_uid`; None
/// for any other text. Such a text is a plain reply that passes verification (its uid has no
/// escapes, so it reads as itself): this only spares scanning it.
fn canonical_v1_verdict(body: &[u8], request_uid: &str) -> Option<bool> {
    const HEADS: [&[u8]; 2] = [
        br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":""#,
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":""#,
    ];
    let uid = request_uid.as_bytes();
    if scan::needs_json_escape(uid) {
        return None;
    }
    let rest = HEADS.iter().find_map(|h| body.strip_prefix(*h))?;
    let rest = rest.strip_prefix(uid)?;
    let (allowed, after) = match rest.strip_prefix(br#"","allowed":true}}"#) {
        Some(after) => (true, after),
        None => (false, rest.strip_prefix(br#"","allowed":false}}"#)?),
    };
    scan::only_whitespace_after(after, 0).then_some(allowed)
}

/// A plain reply's members, borrowed from its body (strings without escapes are their text).
struct PlainParts<'a> {
    api_version: Option<&'a str>,
    kind: Option<&'a str>,
    /// `response`'s `uid` and `allowed`.
    response: Option<(Option<&'a str>, Option<bool>)>,
}

fn plain_parts(body: &[u8]) -> Option<PlainParts<'_>> {
    let text = std::str::from_utf8(body).ok()?;
    let plain_string = |v: usize| {
        let end = scan::checked_string_end(body, v)?;
        let inner = &text[v + 1..end - 1];
        (!inner.contains('\\')).then_some((inner, end))
    };
    let (mut api_version, mut kind, mut response) = (None, None, None);
    let end = scan::checked_members(body, 0, 1, |key, v| {
        let (slot, (value, end)) = match key {
            b"apiVersion" if api_version.is_none() => (&mut api_version, plain_string(v)?),
            b"kind" if kind.is_none() => (&mut kind, plain_string(v)?),
            b"response" if response.is_none() => {
                let (mut uid, mut allowed) = (None, None);
                let end = scan::checked_members(body, v, 2, |key, v| match key {
                    b"uid" if uid.is_none() => {
                        let (value, end) = plain_string(v)?;
                        uid = Some(value);
                        Some(end)
                    }
                    b"allowed" if allowed.is_none() => {
                        let (value, end) = scan::bool_at(body, v)?;
                        allowed = Some(value);
                        Some(end)
                    }
                    _ => None,
                })?;
                response = Some((uid, allowed));
                return Some(end);
            }
            _ => return None,
        };
        *slot = Some(value);
        Some(end)
    })?;
    scan::only_whitespace_after(body, end).then_some(PlainParts {
        api_version,
        kind,
        response,
    })
}

/// A JSON body that decodes to a `Status` with `status: Failure`.
fn failure_status_in_body(body: &[u8]) -> Option<Status> {
    let v: Value = crate::json::from_slice(body).ok()?;
    // client-go decodes it with `v1` as the default version: only `kind: Status` (an unversioned
    // kind, whatever the group and version) decodes to a Status.
    let (api_version, kind) = type_meta(&v).ok()?;
    let version_missing = api_version
        .split_once('/')
        .is_some_and(|(group, version)| !group.is_empty() && version.is_empty());
    if kind != "Status" || api_version.matches('/').count() > 1 || version_missing {
        return None;
    }
    let s: Status = serde_json::from_value(v).ok()?;
    (s.status == "Failure").then_some(s)
}

/// Go encoding/json's syntax error text for what serde_json refused: the character at the
/// position serde_json reports and the scanner state Go names. Shapes without a counterpart
/// keep the generic wording.
fn go_json_error(e: &serde_json::Error, body: &[u8]) -> String {
    use serde_json::error::Category;
    if e.classify() == Category::Eof {
        return "unexpected end of JSON input".into();
    }
    // Nested deeper than Go reads: in its words, without the place.
    if let Some(bracket) = crate::json::exceeded_depth(e) {
        return crate::json::depth_error(bracket);
    }
    let message = e.to_string();
    let offset = byte_offset(body, e.line(), e.column());
    let c = body.get(offset.saturating_sub(1)).copied().unwrap_or(b' ');
    let shown = match c {
        b'\'' => "'\\''".to_string(),
        b'"' => "'\"'".to_string(),
        b'\n' => "'\\n'".to_string(),
        b'\t' => "'\\t'".to_string(),
        b'\r' => "'\\r'".to_string(),
        c if c.is_ascii_graphic() || c == b' ' => format!("'{}'", c as char),
        c => format!("'\\x{c:02x}'"),
    };
    let before = &body[..offset.saturating_sub(1).min(body.len())];
    let last = before.iter().rev().find(|b| !b.is_ascii_whitespace());
    let context = if message.starts_with("key must be a string") {
        "looking for beginning of object key string"
    } else if message.starts_with("trailing comma") {
        if c == b'}' {
            "looking for beginning of object key string"
        } else {
            "looking for beginning of value"
        }
    } else if message.starts_with("expected `:`") {
        "after object key"
    } else if message.starts_with("expected `,` or `}`") {
        "after object key:value pair"
    } else if message.starts_with("expected `,` or `]`") {
        "after array element"
    } else if message.starts_with("control character") {
        "in string literal"
    } else if message.starts_with("invalid escape") {
        "in string escape code"
    } else if message.starts_with("trailing characters") {
        "after top-level value"
    } else if message.starts_with("expected value") || last.is_none() {
        "looking for beginning of value"
    } else {
        "after top-level value"
    };
    format!("invalid character {shown} {context}")
}

fn byte_offset(body: &[u8], line: usize, column: usize) -> usize {
    let mut current = 1;
    let mut start = 0;
    for (i, b) in body.iter().enumerate() {
        if current == line {
            break;
        }
        if *b == b'\n' {
            current += 1;
            start = i + 1;
        }
    }
    start + column
}

/// Upstream's `VerifyAdmissionResponse`.
fn verify(
    review: AdmissionReviewReply,
    uid: &str,
    version: &str,
    mutating: bool,
) -> Result<Verified, String> {
    let Some(r) = review.response else {
        return Err("webhook response was absent".into());
    };
    let patch = r.patch.filter(|p| !p.is_empty());
    let mut patch_type = r.patch_type;
    if version == "v1" {
        if r.uid != uid {
            return Err(format!(
                "expected response.uid={}, got {}",
                status::go_quote(uid),
                status::go_quote(&r.uid)
            ));
        }
        let api_version = review.api_version.unwrap_or_default();
        let kind = review.kind.unwrap_or_default();
        if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
            let (g, v) = api_version
                .split_once('/')
                .unwrap_or(("", api_version.as_str()));
            return Err(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {g}/{v}, Kind={kind}"
            ));
        }
        if mutating {
            match (&patch, &patch_type) {
                (Some(_), None) => {
                    return Err("webhook returned response.patch but not response.patchType".into());
                }
                (None, Some(_)) => {
                    return Err("webhook returned response.patchType but not response.patch".into());
                }
                (_, Some(t)) if t.is_empty() => {
                    return Err("webhook returned invalid response.patchType of \"\"".into());
                }
                _ => {}
            }
        } else {
            if patch.is_some() {
                return Err("validating webhook may not return response.patch".into());
            }
            if patch_type.is_some() {
                return Err("validating webhook may not return response.patchType".into());
            }
        }
    } else if mutating {
        if patch.is_some() {
            patch_type = Some("JSONPatch".into());
        }
    } else {
        return Ok(Verified {
            allowed: r.allowed,
            result: r.status,
            patch: None,
            patch_type: None,
            audit_annotations: r.audit_annotations.unwrap_or_default(),
            warnings: r.warnings.unwrap_or_default(),
        });
    }
    Ok(Verified {
        allowed: r.allowed,
        result: r.status,
        patch,
        patch_type,
        audit_annotations: r.audit_annotations.unwrap_or_default(),
        warnings: r.warnings.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{GroupVersionResource, Operation};
    use serde_json::json;
    use std::sync::Arc;

    /// A review's text is allocated once, at its length (a `Bytes` made of it then needs no
    /// allocation of its own), whatever its uid and pieces.
    #[test]
    fn a_review_text_is_allocated_at_its_exact_length() {
        let uids = ["7c6b0a4e-5d0f-4b9e-9f0e-0d5a1e2b3c4d", "", "a\"b\\c\u{1}é"];
        let heads: [&[&str]; 3] = [
            &[",\"object\":"],
            &[",\"name\":\"x\"", ",\"namespace\":\"y\"", ",\"object\":"],
            &["", ",\"object\":"],
        ];
        for uid in uids {
            for head in heads {
                for (object, old_object) in [("{\"a\":1}", "null"), ("null", "[]")] {
                    let text = review_text("v1beta1", uid, head, object, old_object, "}}");
                    assert_eq!(text.capacity(), text.len(), "{text}");
                    let v: Value = crate::json::from_str(&text).unwrap();
                    assert_eq!(v["request"]["uid"], uid, "{text}");
                    assert_eq!(v["apiVersion"], "admission.k8s.io/v1beta1");
                }
            }
        }
    }

    /// Where the plain reader gives a reply, decoding the wire type gives the same; and it gives
    /// one for the shape most webhooks send.
    #[test]
    fn plain_replies_read_as_decoded() {
        let plain = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u-1","allowed":true}}"#;
        let bodies = [
            plain,
            " {\"kind\" : \"AdmissionReview\", \"response\":{ \"allowed\":false , \"uid\":\"é\"}} \n",
            r#"{"apiVersion":"admission.k8s.io/v1","response":{}}"#,
            r#"{}"#,
            r#"{"response":{"uid":"a\"b","allowed":true}}"#,
            r#"{"response":{"uid":"u","allowed":true,"allowed":false}}"#,
            r#"{"kind":"A","kind":"B","response":{"uid":"u"}}"#,
            r#"{"response":{"uid":null,"allowed":true}}"#,
            r#"{"response":{"uid":"u","allowed":null}}"#,
            r#"{"response":{"uid":"u","allowed":1}}"#,
            r#"{"response":{"uid":"u","allowed":truex}}"#,
            r#"{"response":{"uid":"u","allowed":true},"extra":[1]}"#,
            r#"{"response":{"uid":"u","allowed":true,"warnings":["w"]}}"#,
            r#"{"response":null}"#,
            r#"{"response":{"uid":"u","allowed":true}} x"#,
            r#"{"response":{"uid":"u","allowed":true}"#,
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure"}"#,
            r#"[1]"#,
            "{\"response\":{\"uid\":\"\u{1}\",\"allowed\":true}}",
        ];
        for body in bodies {
            let decoded = crate::json::from_slice::<AdmissionReviewReply>(body.as_bytes());
            if let Some(read) = plain_reply(body.as_bytes()) {
                assert_eq!(Some(&read), decoded.as_ref().ok(), "{body}");
            }
        }
        assert!(plain_reply(bodies[0].as_bytes()).is_some());
        assert!(plain_reply(bodies[1].as_bytes()).is_some());
        let bad = b"{\"response\":{\"uid\":\"\xff\",\"allowed\":true}}";
        assert_eq!(plain_reply(bad), None);
        let read = plain_reply(plain.as_bytes()).unwrap();
        assert_eq!(read.kind.as_deref(), Some("AdmissionReview"));
        assert_eq!(
            read.response.as_ref().map(|r| (&*r.uid, r.allowed)),
            Some(("u-1", true))
        );
        // The v1 shortcut answers for it, as decoding and verifying do.
        assert_eq!(plain_v1_verdict(plain.as_bytes(), "u-1"), Some(true));
        assert_eq!(canonical_v1_verdict(plain.as_bytes(), "u-1"), Some(true));
        let go = "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\",\"response\":{\"uid\":\"u-1\",\"allowed\":false}}\n";
        assert_eq!(canonical_v1_verdict(go.as_bytes(), "u-1"), Some(false));
        assert_eq!(plain_v1_verdict(go.as_bytes(), "u-1"), Some(false));
        assert_eq!(canonical_v1_verdict(go.as_bytes(), "u-"), None);
        assert_eq!(canonical_v1_verdict(go.as_bytes(), "u-12"), None);
        assert_eq!(plain_v1_verdict(plain.as_bytes(), "u-2"), None);
        let outcome = ReplyOutcome::Http {
            status: 200,
            content_type: None,
            body: plain.as_bytes().to_vec(),
        };
        let release = crate::KubeVersion::NEWEST;
        let shortcut = interpret_reply(&outcome, "https://h/", "u-1", "v1", true, release);
        assert_eq!(
            shortcut,
            decoded_reply(&outcome, "https://h/", "u-1", "v1", true, release)
        );
        assert!(shortcut.is_ok_and(|v| v.allowed));
    }

    proptest::proptest! {
        /// Members of the plain shape and others, any order, repeated or not, any values.
        #[test]
        fn any_reply_the_plain_reader_takes_decodes_the_same(
            top in proptest::collection::vec((0usize..4, 0usize..6), 0..5),
            inner in proptest::collection::vec((0usize..4, 0usize..6), 0..5),
        ) {
            let keys = ["apiVersion", "kind", "response", "other"];
            let inner_keys = ["uid", "allowed", "status", "other"];
            let values = ["\"v\"", "\"a\\\"b\"", "true", "false", "null", "{}"];
            let members = |m: &[(usize, usize)], keys: &[&str], response: Option<&str>| {
                m.iter()
                    .map(|&(k, v)| {
                        let value = match (keys[k], response) {
                            ("response", Some(r)) if v < 3 => r.to_string(),
                            _ => values[v].to_string(),
                        };
                        format!("\"{}\":{value}", keys[k])
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let response = format!("{{{}}}", members(&inner, &inner_keys, None));
            let body = format!("{{{}}}", members(&top, &keys, Some(&response)));
            let decoded = crate::json::from_slice::<AdmissionReviewReply>(body.as_bytes());
            if let Some(read) = plain_reply(body.as_bytes()) {
                proptest::prop_assert_eq!(Some(&read), decoded.as_ref().ok(), "{}", body);
            }
        }

        /// Where the byte-for-byte shortcut answers, the plain reader answers the same.
        #[test]
        fn the_canonical_shortcut_reads_as_the_plain_reader(
            kind_first in proptest::bool::ANY,
            uid in "[a-z0-9\"\\\\-]{0,4}",
            middle in "[a-z0-9\"\\\\-]{0,4}",
            same in proptest::bool::ANY,
            tail in proptest::sample::select(vec![
                r#"","allowed":true}}"#, r#"","allowed":false}}"#, "\",\"allowed\":true}}\n",
                r#"","allowed":true} }"#, r#"","allowed":true,"x":1}}"#, r#"","allowed":tru}}"#,
            ]),
        ) {
            let head = if kind_first {
                r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":""#
            } else {
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":""#
            };
            let middle = if same { uid.clone() } else { middle };
            let body = format!("{head}{middle}{tail}");
            if let Some(verdict) = canonical_v1_verdict(body.as_bytes(), &uid) {
                proptest::prop_assert_eq!(Some(verdict), plain_v1_verdict(body.as_bytes(), &uid), "{}", body);
            }
            if middle == uid && !uid.contains(['"', '\\']) && (tail.ends_with("}}") || tail.ends_with("}}\n")) && !tail.contains('x') && !tail.contains("tru}") {
                proptest::prop_assert!(canonical_v1_verdict(body.as_bytes(), &uid).is_some(), "{}", body);
            }
        }

        /// Where the v1 shortcut gives a verdict, decoding and verifying give the same result.
        #[test]
        fn the_plain_v1_shortcut_verifies_as_decoding_does(
            api_version in proptest::sample::select(vec![None, Some("admission.k8s.io/v1"), Some("admission.k8s.io/v1"), Some("admission.k8s.io/v1beta1"), Some("v1")]),
            kind in proptest::sample::select(vec![None, Some("AdmissionReview"), Some("AdmissionReview"), Some("Status"), Some("Other")]),
            uid in proptest::sample::select(vec![None, Some("u-1"), Some("u-1"), Some("u-2"), Some("")]),
            allowed in proptest::option::of(proptest::bool::ANY),
            response in proptest::bool::ANY,
            mutating in proptest::bool::ANY,
            status in proptest::sample::select(vec![101u16, 200, 204, 206, 207, 400, 500]),
        ) {
            let mut members = Vec::new();
            if let Some(a) = api_version {
                members.push(format!("\"apiVersion\":\"{a}\""));
            }
            if let Some(k) = kind {
                members.push(format!("\"kind\":\"{k}\""));
            }
            if response {
                let mut inner = Vec::new();
                if let Some(u) = uid {
                    inner.push(format!("\"uid\":\"{u}\""));
                }
                if let Some(a) = allowed {
                    inner.push(format!("\"allowed\":{a}"));
                }
                members.push(format!("\"response\":{{{}}}", inner.join(",")));
            }
            let body = format!("{{{}}}", members.join(","));
            let outcome = ReplyOutcome::Http {
                status,
                content_type: Some("application/json".into()),
                body: body.clone().into_bytes(),
            };
            let url = "https://h/x?timeout=10s";
            let release = crate::KubeVersion::NEWEST;
            let full = decoded_reply(&outcome, url, "u-1", "v1", mutating, release);
            let shortcut = interpret_reply(&outcome, url, "u-1", "v1", mutating, release);
            proptest::prop_assert_eq!(&shortcut, &full, "{}", body);
            if let Some(verdict) = canonical_v1_verdict(body.as_bytes(), "u-1") {
                proptest::prop_assert_eq!(Some(verdict), plain_v1_verdict(body.as_bytes(), "u-1"));
            }
            if body == r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u-1","allowed":true}}"# && status == 200 {
                proptest::prop_assert_eq!(plain_v1_verdict(body.as_bytes(), "u-1"), Some(true));
            }
        }
    }

    /// Decoding a reply straight into the wire type must give what decoding it into a `Value`
    /// first gives, duplicate members included.
    #[test]
    fn replies_decode_as_through_a_value() {
        let release = crate::KubeVersion::NEWEST;
        let http = |body: &str| ReplyOutcome::Http {
            status: 200,
            content_type: Some("application/json".into()),
            body: body.as_bytes().to_vec(),
        };
        for body in [
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u","allowed":true,"patch":"W10=","patchType":"JSONPatch","auditAnnotations":{"a":"1","a":"2"},"warnings":["w","w"]}}"#,
            r#"{"kind":"AdmissionReview","response":{"uid":"u","allowed":false,"status":{"code":403,"message":"no <"}}}"#,
            r#"{"kind":null,"response":{"uid":"u","allowed":true,"extra":[1,{}]},"response2":1}"#,
            r#"{"response":{"uid":"u","uid":"v","allowed":true}}"#,
            r#"{"apiVersion":"admission.k8s.io/v1","response":null}"#,
        ] {
            let value: Value = crate::json::from_str(body).unwrap();
            let expected = serde_json::from_value::<AdmissionReviewReply>(value).unwrap();
            assert_eq!(
                decode_reply(&http(body), "https://x", "v1", release).unwrap(),
                expected,
                "{body}"
            );
        }
        let twice = r#"{"apiVersion":"admission.k8s.io/v1","apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{"uid":"u"}}"#;
        assert_eq!(
            decode_reply(&http(twice), "https://x", "v1", release)
                .unwrap_err()
                .reason,
            "failed to call webhook: converting (v1beta1.AdmissionReview) to (v1.AdmissionReview): unknown conversion"
        );
        // A Status in a successful reply decodes to a Status, which the codec then cannot
        // convert into the AdmissionReview it decodes into.
        let status =
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"m","code":500}"#;
        assert_eq!(
            decode_reply(&http(status), "https://x", "v1", release)
                .unwrap_err()
                .reason,
            "failed to call webhook: converting (v1.Status) to (v1.AdmissionReview): unknown conversion"
        );
    }

    /// What the decoder makes of replies that are not a JSON object: YAML for what does not start
    /// with `{`, Go's syntax errors for what does.
    #[test]
    fn replies_that_are_not_json_objects_read_as_the_decoder_reads_them() {
        let release = crate::KubeVersion::NEWEST;
        let reason = |body: &str| {
            let outcome = ReplyOutcome::Http {
                status: 200,
                content_type: Some("text/plain".into()),
                body: body.as_bytes().to_vec(),
            };
            match decoded_reply(&outcome, "https://x", "u", "v1", false, release) {
                Ok(v) => format!("allowed {}", v.allowed),
                Err(e) => format!("{} {}", e.status.code, e.reason),
            }
        };
        let find_kind = r#"struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#;
        let parse = "failed to call webhook: couldn't get version/kind; json parse error:";
        for (body, want) in [
            (
                "webhook invalid response",
                format!(
                    "503 {parse} json: cannot unmarshal string into Go value of type {find_kind}"
                ),
            ),
            (
                "[1, 2]",
                format!(
                    "503 {parse} json: cannot unmarshal array into Go value of type {find_kind}"
                ),
            ),
            // YAML that is a mapping decodes into an empty AdmissionReview.
            (
                "error: boom",
                "503 received invalid webhook response: webhook response was absent".into(),
            ),
            (
                "null",
                "503 received invalid webhook response: webhook response was absent".into(),
            ),
            (
                "{oops",
                format!(
                    "503 {parse} invalid character 'o' looking for beginning of object key string"
                ),
            ),
            (
                r#"{"a":1,}"#,
                format!(
                    "503 {parse} invalid character '}}' looking for beginning of object key string"
                ),
            ),
            (
                r#"{"a" 1}"#,
                format!("503 {parse} invalid character '1' after object key"),
            ),
            (
                r#"{"a":1 "b":2}"#,
                format!("503 {parse} invalid character '\"' after object key:value pair"),
            ),
            (
                r#"{"a":[1 2]}"#,
                format!("503 {parse} invalid character '2' after array element"),
            ),
            (
                r#"{"a":}"#,
                format!("503 {parse} invalid character '}}' looking for beginning of value"),
            ),
            (
                r#"{"a":1} x"#,
                format!("503 {parse} invalid character 'x' after top-level value"),
            ),
            (
                r#"{"a":1"#,
                format!("503 {parse} unexpected end of JSON input"),
            ),
            (
                r#"{"kind":5}"#,
                format!(
                    "503 {parse} json: cannot unmarshal number into Go struct field .kind of type string"
                ),
            ),
        ] {
            assert_eq!(reason(body), want, "{body}");
        }
    }

    /// Go's `mime.ParseMediaType` verdicts, as client-go meets them in a reply's Content-Type.
    #[test]
    fn media_types_parse_as_go_parses_them() {
        for (v, want) in [
            ("application/json", Ok("application/json")),
            (" Application/JSON ; charset=UTF-8", Ok("application/json")),
            ("text/plain; charset=\"utf-8\";", Ok("text/plain")),
            ("json", Ok("json")),
            ("a/b; x=1; x=1", Ok("a/b")),
            ("; charset=utf-8", Err("mime: no media type")),
            (
                "application json",
                Err("mime: expected slash after first token"),
            ),
            ("application/", Err("mime: expected token after slash")),
            (
                "application/json x",
                Err("mime: unexpected content after media subtype"),
            ),
            (
                "application/json; charset",
                Err("mime: invalid media parameter"),
            ),
            (
                "application/json; charset=",
                Err("mime: invalid media parameter"),
            ),
            (
                "a/b; x=\"unterminated",
                Err("mime: invalid media parameter"),
            ),
            ("a/b; x=1; x=2", Err("mime: duplicate parameter name")),
        ] {
            assert_eq!(parse_media_type(v).as_deref().map_err(|e| *e), want, "{v}");
        }
    }

    /// `review_body` must write exactly what serialising `build_review`'s wire type writes.
    #[test]
    fn pieces_are_found_again_only_for_what_they_were_written_from() {
        let user = Arc::new(UserInfo {
            username: "alice".into(),
            ..UserInfo::default()
        });
        let options = Arc::new(json!({"kind": "CreateOptions"}));
        let attrs = Attributes {
            operation: Operation::Create,
            kind: GroupVersionKind::new("", "v1", "ConfigMap").into(),
            resource: GroupVersionResource::new("", "v1", "configmaps").into(),
            sub_resource: String::new(),
            namespace: "default".into(),
            name: "a".into(),
            object: None,
            old_object: None,
            dry_run: false,
            options: Some(Arc::clone(&options)),
            user_info: Arc::clone(&user),
        };
        let invocation = Invocation {
            resource: attrs.resource.clone(),
            sub_resource: String::new(),
            kind: attrs.kind.clone(),
            rule: 0,
            equivalent: false,
        };
        let mut cache = PieceCache::default();
        cache.remember_kinds(
            &attrs,
            &invocation,
            request_kinds(&attrs, &invocation).into(),
        );
        cache.remember_user(&attrs, request_user(&attrs).into());
        cache.remember_tail(
            &attrs,
            request_tail(&attrs, crate::KubeVersion::NEWEST).into(),
        );
        let found = |cache: &PieceCache, a: &Attributes, inv: &Invocation| {
            [cache.kinds(a, inv), cache.user(a), cache.tail(a)].map(|t| t.map(|t| t.to_string()))
        };
        let written = |a: &Attributes, inv: &Invocation| {
            [
                request_kinds(a, inv),
                request_user(a),
                request_tail(a, crate::KubeVersion::NEWEST),
            ]
            .map(Some)
        };
        // Another request of the same kind, user and options: every piece is found again.
        let mut other = attrs.clone();
        other.name = "b".into();
        assert_eq!(
            found(&cache, &other, &invocation),
            written(&other, &invocation)
        );
        // What a piece is written from differs: that piece is not found.
        other.operation = Operation::Update;
        other.dry_run = true;
        let mut equivalent = invocation.clone();
        equivalent.resource = GroupVersionResource::new("", "v1beta1", "configmaps").into();
        assert_eq!(found(&cache, &other, &equivalent), [None, None, None]);
        let matched = Arc::new(MatchTexts {
            resource: "/v1, Resource=configmaps".into(),
            kind: "/v1, Kind=ConfigMap".into(),
        });
        cache.remember_match_texts(&invocation, Arc::clone(&matched));
        let other_rule = Invocation {
            rule: 3,
            ..invocation.clone()
        };
        assert_eq!(cache.match_texts(&other_rule), Some(matched));
        assert_eq!(cache.match_texts(&equivalent), None);
        // An equal user in another allocation is the same user; options are found again only
        // in the same allocation.
        let mut copy = attrs.clone();
        copy.user_info = Arc::new((*user).clone());
        copy.options = Some(Arc::new((*options).clone()));
        assert_eq!(
            found(&cache, &copy, &invocation)[1],
            Some(request_user(&copy))
        );
        assert_eq!(found(&cache, &copy, &invocation)[2], None);
        copy.user_info = Arc::new(UserInfo {
            username: "bob".into(),
            ..UserInfo::default()
        });
        assert_eq!(found(&cache, &copy, &invocation)[1], None);
    }

    #[test]
    fn review_body_is_the_wire_type_serialised() {
        let mut attrs = Attributes {
            operation: Operation::Update,
            kind: GroupVersionKind::new("apps", "v1", "Deployment").into(),
            resource: GroupVersionResource::new("apps", "v1", "deployments").into(),
            sub_resource: String::new(),
            namespace: String::new(),
            name: String::new(),
            object: None,
            old_object: None,
            dry_run: false,
            options: None,
            user_info: Arc::default(),
        };
        let mut invocation = Invocation {
            resource: attrs.resource.clone(),
            sub_resource: String::new(),
            kind: attrs.kind.clone(),
            rule: 0,
            equivalent: false,
        };
        let check = |attrs: &Attributes, invocation: &Invocation, version: &str| {
            let object = attrs.object_value().cloned().unwrap_or(Value::Null);
            let old_object = attrs.old_object_value().cloned().unwrap_or(Value::Null);
            let expected = serde_json::to_vec(&build_review(
                attrs,
                invocation,
                object.clone(),
                old_object.clone(),
                "uid-1",
                version,
            ))
            .unwrap();
            let raw = |v: &Value| serde_json::value::to_raw_value(v).unwrap();
            let body = review_body(
                attrs,
                invocation,
                &raw(&object),
                &raw(&old_object),
                "uid-1",
                version,
                crate::KubeVersion::NEWEST,
            );
            // The same review; the options in their Go type's field order, and the newline
            // Go's encoder ends with.
            let expected: Value = crate::json::from_slice(&expected).unwrap();
            assert_eq!(crate::json::from_str::<Value>(&body).unwrap(), expected);
            assert!(body.ends_with("}}\n"), "{body}");
        };
        check(&attrs, &invocation, "v1");
        attrs.sub_resource = "scale".into();
        attrs.namespace = "ns <&>".into();
        attrs.name = "n\u{2028}\"x\"".into();
        attrs.dry_run = true;
        attrs.options = Some(Arc::new(
            json!({"kind": "UpdateOptions", "fieldManager": "<m>"}),
        ));
        attrs.object = Some(Arc::new(
            json!({"a": [1, 2.5, -3, 1e300, null, {}], "s": "\u{1}\\/<"}).into(),
        ));
        attrs.old_object = Some(Arc::new(json!({"b": true}).into()));
        attrs.user_info = Arc::new(UserInfo {
            username: "u".into(),
            uid: "1".into(),
            groups: vec!["g".into()],
            extra: BTreeMap::from([("k".to_string(), vec!["v".to_string()])]),
        });
        invocation.sub_resource = "scale".into();
        invocation.kind = GroupVersionKind::new("autoscaling", "v1", "Scale").into();
        check(&attrs, &invocation, "v1beta1");
    }
}

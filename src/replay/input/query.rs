//! Request URIs as the apiserver reads them: Go's `url.ParseQuery` (through `req.URL.Query()`,
//! which keeps the valid pairs and drops the rest) and the `meta/v1` parameter conversions that
//! turn query values into `CreateOptions`, `UpdateOptions` and `DeleteOptions`.

use serde_json::{Map, Value, json};

/// The query of a request URI, pairs in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Query(Vec<(String, String)>);

impl Query {
    /// Go `url.ParseQuery` of the part of `uri` after the first `?`, keeping what Go keeps:
    /// pairs containing `;` and pairs with bad escapes are dropped, `+` is a space.
    pub(crate) fn of_uri(uri: &str) -> Self {
        let raw = uri.split_once('?').map_or("", |(_, q)| q);
        let raw = raw.split_once('#').map_or(raw, |(q, _)| q);
        let mut pairs = Vec::new();
        for part in raw.split('&') {
            if part.is_empty() || part.contains(';') {
                continue;
            }
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            if let (Some(k), Some(v)) = (unescape(k, true), unescape(v, true)) {
                pairs.push((k, v));
            }
        }
        Query(pairs)
    }

    /// Every value of `key`, in order.
    pub(crate) fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The first value of `key` (`Convert_Slice_string_To_string`).
    pub(crate) fn first<'a>(&'a self, key: &'a str) -> Option<&'a str> {
        self.all(key).next()
    }

    /// True when the query has no pair at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `dryRun` values, as a JSON array, when there are any.
    fn dry_run(&self) -> Option<Value> {
        let v: Vec<Value> = self.all("dryRun").map(|s| json!(s)).collect();
        (!v.is_empty()).then_some(Value::Array(v))
    }
}

/// The path of a request URI (before `?`), percent-decoded as Go's `URL.Path`; `None` when an
/// escape is malformed.
pub(crate) fn uri_path(uri: &str) -> Option<String> {
    let path = uri.split(['?', '#']).next().unwrap_or_default();
    unescape(path, false)
}

/// Go's `unescape` in query (`+` is a space) or path mode; `None` on a bad `%` escape.
fn unescape(s: &str, plus_is_space: bool) -> Option<String> {
    if !(s.contains('%') || plus_is_space && s.contains('+')) {
        return Some(s.to_string());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'%' => {
                let hex = b.get(i + 1..i + 3)?;
                let hi = (hex[0] as char).to_digit(16)?;
                let lo = (hex[1] as char).to_digit(16)?;
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// `CreateOptions` or `UpdateOptions` (`kind`) as the create, update and patch handlers pass them
/// to admission: type meta `meta.k8s.io/v1`, then `dryRun`, `fieldManager` and `fieldValidation`
/// from the query (a patch's `PatchOptions` become `UpdateOptions` or `CreateOptions` the same
/// way, `force` dropped).
pub(crate) fn write_options(kind: &str, q: &Query) -> Value {
    let mut m = type_meta(kind);
    if let Some(d) = q.dry_run() {
        m.insert("dryRun".into(), d);
    }
    for key in ["fieldManager", "fieldValidation"] {
        if let Some(v) = q.first(key).filter(|v| !v.is_empty()) {
            m.insert(key.into(), json!(v));
        }
    }
    Value::Object(m)
}

fn type_meta(kind: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("kind".into(), json!(kind));
    m.insert("apiVersion".into(), json!("meta.k8s.io/v1"));
    m
}

/// `DeleteOptions` decoded from the query (`autoConvert_url_Values_To_v1_DeleteOptions`), with
/// the handler's type meta. `Err` names the parameter the apiserver would have refused (then no
/// admission happened).
pub(crate) fn delete_options_from_query(q: &Query) -> Result<Map<String, Value>, String> {
    let mut m = type_meta("DeleteOptions");
    if let Some(v) = q.first("gracePeriodSeconds") {
        let n: i64 = v
            .parse()
            .map_err(|_| format!("gracePeriodSeconds: invalid integer {v:?}"))?;
        m.insert("gracePeriodSeconds".into(), json!(n));
    }
    if let Some(v) = q.first("orphanDependents") {
        m.insert("orphanDependents".into(), json!(go_bool(v)));
    }
    if let Some(v) = q.first("propagationPolicy") {
        m.insert("propagationPolicy".into(), json!(v));
    }
    if let Some(d) = q.dry_run() {
        m.insert("dryRun".into(), d);
    }
    Ok(m)
}

/// `DeleteOptions` from a request body as the audit event recorded it: the `meta/v1` fields,
/// with the handler's type meta.
pub(crate) fn delete_options_from_body(body: &Map<String, Value>) -> Map<String, Value> {
    let mut m = type_meta("DeleteOptions");
    for key in [
        "gracePeriodSeconds",
        "preconditions",
        "orphanDependents",
        "propagationPolicy",
        "dryRun",
    ] {
        match body.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) if a.is_empty() => {}
            Some(v) => {
                m.insert(key.into(), v.clone());
            }
        }
    }
    m
}

/// `Convert_Slice_string_To_bool`: `0` and any case of `false` are false, anything else true.
pub(crate) fn go_bool(v: &str) -> bool {
    !(v == "0" || v.eq_ignore_ascii_case("false"))
}

/// True when `options` carry a `dryRun` (`dryrun.IsDryRun`: any value).
pub(crate) fn is_dry_run(options: &Value) -> bool {
    options
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_go() {
        let q =
            Query::of_uri("/api/v1/x?dryRun=All&fieldManager=a+b%2Fc&bad=%zz&x;y=1&dryRun=All&&k");
        assert_eq!(q.all("dryRun").collect::<Vec<_>>(), ["All", "All"]);
        assert_eq!(q.first("fieldManager"), Some("a b/c"));
        assert_eq!(q.first("bad"), None);
        assert_eq!(q.first("x"), None);
        assert_eq!(q.first("k"), Some(""));
        assert!(Query::of_uri("/api/v1/pods").is_empty());
    }

    #[test]
    fn options() {
        let q = Query::of_uri("/x?fieldManager=kubectl-create&fieldValidation=Strict&dryRun=All");
        assert_eq!(
            write_options("CreateOptions", &q),
            json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "dryRun": ["All"],
                   "fieldManager": "kubectl-create", "fieldValidation": "Strict"})
        );
        let q = Query::of_uri(
            "/x?gracePeriodSeconds=-3&orphanDependents=FALSE&propagationPolicy=Foreground",
        );
        assert_eq!(
            Value::Object(delete_options_from_query(&q).unwrap()),
            json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "gracePeriodSeconds": -3,
                   "orphanDependents": false, "propagationPolicy": "Foreground"})
        );
        assert!(delete_options_from_query(&Query::of_uri("/x?gracePeriodSeconds=soon")).is_err());
        assert_eq!(
            uri_path("/api/v1/a%2Fb/proxy/x?y").as_deref(),
            Some("/api/v1/a/b/proxy/x")
        );
    }
}

//! Reading configurations from YAML/JSON text and files.

mod policy;

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Map, Value};

use super::{LoadError, LoadedConfiguration, Source};
use crate::api::{
    LabelSelector, LabelSelectorRequirement, MatchCondition, RuleWithOperations, ServiceReference,
    Webhook, WebhookClientConfig, WebhookConfiguration, WebhookKind,
};

/// The group of the webhook configuration kinds.
pub const GROUP: &str = "admissionregistration.k8s.io";
/// `admissionregistration.k8s.io/v1`.
pub const V1: &str = "admissionregistration.k8s.io/v1";
/// `admissionregistration.k8s.io/v1beta1`.
pub const V1BETA1: &str = "admissionregistration.k8s.io/v1beta1";

/// One YAML document of a stream: its text and the 0-based line it starts on.
struct RawDocument<'a> {
    text: std::borrow::Cow<'a, str>,
    first_line: usize,
}

/// Splits a YAML stream on `---` document markers, so that a syntax error in one document does not
/// hide the others. A marker followed by content on the same line keeps that content (the marker
/// itself is blanked so columns stay right).
fn split_documents(text: &str) -> Vec<RawDocument<'_>> {
    let mut docs = Vec::new();
    let mut start = 0usize;
    let mut start_line = 0usize;
    let mut prefix_blank = false;
    let mut offset = 0usize;
    for (line_no, line) in text.split_inclusive('\n').enumerate() {
        let trimmed = line.trim_end_matches(['\n', '\r']);
        let is_marker =
            trimmed == "---" || trimmed.starts_with("--- ") || trimmed.starts_with("---\t");
        if is_marker {
            if line_no > 0 || prefix_blank {
                docs.push(make_doc(&text[start..offset], start_line, prefix_blank));
            }
            start = offset;
            start_line = line_no;
            prefix_blank = true;
        }
        offset += line.len();
    }
    if start < text.len() || docs.is_empty() {
        docs.push(make_doc(&text[start..], start_line, prefix_blank));
    }
    docs
}

fn make_doc(chunk: &str, first_line: usize, blank_marker: bool) -> RawDocument<'_> {
    if blank_marker && chunk.starts_with("---") {
        let mut s = String::with_capacity(chunk.len());
        s.push_str("   ");
        s.push_str(&chunk[3..]);
        RawDocument {
            text: s.into(),
            first_line,
        }
    } else {
        RawDocument {
            text: chunk.into(),
            first_line,
        }
    }
}

/// Parse text (YAML or JSON; multi-document YAML; `kind: List` or any `*List` with `items`); each
/// document (or List item) yields a configuration or an error, and one bad document never hides
/// the others. Empty documents are skipped.
pub fn parse_documents(text: &str, file: &str) -> Vec<Result<LoadedConfiguration, LoadError>> {
    parse_with(text, file, true, |value, source, item| {
        Some(decode_object(value, source, item))
    })
}

/// The ValidatingAdmissionPolicies and ValidatingAdmissionPolicyBindings of a text read as
/// [`parse_documents`] reads it; documents of other kinds and YAML syntax errors (which
/// [`parse_documents`] reports) are passed over.
pub fn parse_policy_documents(
    text: &str,
    file: &str,
) -> Vec<Result<super::policy::LoadedPolicy, LoadError>> {
    parse_with(text, file, false, |value, source, item| {
        policy::decode_policy_object(value, source, item).transpose()
    })
}

/// Splits `text` into documents and List items and decodes each with `decode`, which returns
/// None for an object it passes over.
fn parse_with<T>(
    text: &str,
    file: &str,
    syntax_errors: bool,
    mut decode: impl FnMut(Value, Source, Option<usize>) -> Option<Result<T, LoadError>>,
) -> Vec<Result<T, LoadError>> {
    let mut out = Vec::new();
    let mut index = 0usize;
    for doc in split_documents(text) {
        let line = Some(doc.first_line + 1);
        let parsed: Result<Value, _> = crate::yaml::from_str(&doc.text);
        match parsed {
            Err(e) => {
                if syntax_errors {
                    out.push(Err(LoadError::Syntax {
                        at: Source {
                            file: file.to_string(),
                            document: index,
                            line,
                        },
                        line: doc.first_line + e.line.unwrap_or(1),
                        column: e.column.unwrap_or(1),
                        message: e.message,
                    }));
                }
                index += 1;
            }
            Ok(Value::Null) => {}
            Ok(value) => {
                let mut next_source = || {
                    let s = Source {
                        file: file.to_string(),
                        document: index,
                        line,
                    };
                    index += 1;
                    s
                };
                let is_list = value
                    .get("kind")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.ends_with("List"))
                    && value.get("items").is_some_and(Value::is_array);
                match value {
                    Value::Object(mut obj) if is_list => {
                        if let Some(Value::Array(items)) = obj.remove("items") {
                            for (i, item) in items.into_iter().enumerate() {
                                out.extend(decode(item, next_source(), Some(i)));
                            }
                        }
                    }
                    other => out.extend(decode(other, next_source(), None)),
                }
            }
        }
    }
    out
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Decoding state: the source, the unknown fields found so far.
struct Decoder {
    source: Source,
    unknown: Vec<String>,
    item: Option<usize>,
}

impl Decoder {
    /// `metadata` (a mapping; absent or null reads as empty) and its `name` (a string; absent
    /// or null reads as empty).
    fn metadata_and_name(&self, obj: &Map<String, Value>) -> Result<(Value, String), LoadError> {
        let metadata = match obj.get("metadata") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(m @ Value::Object(_)) => m.clone(),
            Some(v) => return Err(self.type_error("metadata", "a mapping", v)),
        };
        let name = match metadata.get("name") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(v) => return Err(self.type_error("metadata.name", "a string", v)),
        };
        Ok((metadata, name))
    }

    fn type_error(&self, path: &str, expected: &str, found: &Value) -> LoadError {
        LoadError::FieldType {
            at: self.source.clone(),
            item: self.item,
            field: path.to_string(),
            message: format!("expected {expected}, found {}", describe(found)),
        }
    }

    fn check_keys(&mut self, obj: &Map<String, Value>, path: &str, known: &[&str]) {
        for k in obj.keys() {
            if !known.contains(&k.as_str()) {
                self.unknown.push(join(path, k));
            }
        }
    }

    fn string(
        &self,
        obj: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Option<String>, LoadError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.type_error(&join(path, key), "a string", v)),
        }
    }

    fn int32(
        &self,
        obj: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Option<i32>, LoadError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_i64().and_then(|n| i32::try_from(n).ok()) {
                Some(n) => Ok(Some(n)),
                None => Err(self.type_error(&join(path, key), "a 32-bit integer", v)),
            },
        }
    }

    fn strings(
        &self,
        obj: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Option<Vec<String>>, LoadError> {
        let p = join(path, key);
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(self.type_error(&format!("{p}[{i}]"), "a string", other)),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(v) => Err(self.type_error(&p, "a list of strings", v)),
        }
    }

    fn object<'v>(
        &self,
        obj: &'v Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Option<&'v Map<String, Value>>, LoadError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(v) => Err(self.type_error(&join(path, key), "a mapping", v)),
        }
    }

    fn array<'v>(
        &self,
        obj: &'v Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Option<&'v [Value]>, LoadError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(self.type_error(&join(path, key), "a list", v)),
        }
    }

    fn element<'v>(&self, v: &'v Value, path: &str) -> Result<&'v Map<String, Value>, LoadError> {
        match v {
            Value::Object(m) => Ok(m),
            other => Err(self.type_error(path, "a mapping", other)),
        }
    }

    fn webhook(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
        kind: WebhookKind,
    ) -> Result<Webhook, LoadError> {
        let mut known = vec![
            "name",
            "clientConfig",
            "rules",
            "failurePolicy",
            "matchPolicy",
            "namespaceSelector",
            "objectSelector",
            "sideEffects",
            "timeoutSeconds",
            "admissionReviewVersions",
            "matchConditions",
        ];
        if kind == WebhookKind::Mutating {
            known.push("reinvocationPolicy");
        }
        self.check_keys(obj, path, &known);
        let rules = match self.array(obj, "rules", path)? {
            None => None,
            Some(items) => Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| self.rule(v, &format!("{path}.rules[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        let match_conditions = match self.array(obj, "matchConditions", path)? {
            None => None,
            Some(items) => Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let p = format!("{path}.matchConditions[{i}]");
                        let m = self.element(v, &p)?;
                        self.check_keys(m, &p, &["name", "expression"]);
                        Ok(MatchCondition {
                            name: self.string(m, "name", &p)?.unwrap_or_default(),
                            expression: self.string(m, "expression", &p)?.unwrap_or_default(),
                        })
                    })
                    .collect::<Result<Vec<_>, LoadError>>()?,
            ),
        };
        let client_config = match self.object(obj, "clientConfig", path)? {
            None => WebhookClientConfig::default(),
            Some(cc) => self.client_config(cc, &join(path, "clientConfig"))?,
        };
        Ok(Webhook {
            name: self.string(obj, "name", path)?.unwrap_or_default(),
            client_config,
            rules,
            failure_policy: self.string(obj, "failurePolicy", path)?,
            match_policy: self.string(obj, "matchPolicy", path)?,
            namespace_selector: self.selector(obj, "namespaceSelector", path)?,
            object_selector: self.selector(obj, "objectSelector", path)?,
            side_effects: self.string(obj, "sideEffects", path)?,
            timeout_seconds: self.int32(obj, "timeoutSeconds", path)?,
            admission_review_versions: self.strings(obj, "admissionReviewVersions", path)?,
            reinvocation_policy: if kind == WebhookKind::Mutating {
                self.string(obj, "reinvocationPolicy", path)?
            } else {
                None
            },
            match_conditions,
        })
    }

    fn rule(&mut self, v: &Value, path: &str) -> Result<RuleWithOperations, LoadError> {
        let m = self.element(v, path)?;
        self.check_keys(
            m,
            path,
            &[
                "operations",
                "apiGroups",
                "apiVersions",
                "resources",
                "scope",
            ],
        );
        Ok(RuleWithOperations {
            operations: self.strings(m, "operations", path)?,
            api_groups: self.strings(m, "apiGroups", path)?,
            api_versions: self.strings(m, "apiVersions", path)?,
            resources: self.strings(m, "resources", path)?,
            scope: self.string(m, "scope", path)?,
        })
    }

    fn client_config(
        &mut self,
        cc: &Map<String, Value>,
        path: &str,
    ) -> Result<WebhookClientConfig, LoadError> {
        self.check_keys(cc, path, &["url", "service", "caBundle"]);
        let service = match self.object(cc, "service", path)? {
            None => None,
            Some(s) => {
                let p = join(path, "service");
                self.check_keys(s, &p, &["namespace", "name", "path", "port"]);
                Some(ServiceReference {
                    namespace: self.string(s, "namespace", &p)?.unwrap_or_default(),
                    name: self.string(s, "name", &p)?.unwrap_or_default(),
                    path: self.string(s, "path", &p)?,
                    port: self.int32(s, "port", &p)?,
                })
            }
        };
        let ca_bundle = match self.string(cc, "caBundle", path)? {
            None => None,
            Some(b64) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(b64.trim())
                    .map_err(|e| LoadError::FieldType {
                        at: self.source.clone(),
                        item: self.item,
                        field: join(path, "caBundle"),
                        message: format!(
                            "expected base64-encoded PEM data: illegal base64 data: {e}"
                        ),
                    })?,
            ),
        };
        Ok(WebhookClientConfig {
            url: self.string(cc, "url", path)?,
            service,
            ca_bundle,
        })
    }

    fn selector(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Option<LabelSelector>, LoadError> {
        let Some(sel) = self.object(obj, key, path)? else {
            return Ok(None);
        };
        let p = join(path, key);
        self.check_keys(sel, &p, &["matchLabels", "matchExpressions"]);
        let match_labels = match self.object(sel, "matchLabels", &p)? {
            None => None,
            Some(m) => Some(
                m.iter()
                    .map(|(k, v)| match v {
                        Value::String(s) => Ok((k.clone(), s.clone())),
                        other => {
                            Err(self.type_error(&format!("{p}.matchLabels.{k}"), "a string", other))
                        }
                    })
                    .collect::<Result<_, _>>()?,
            ),
        };
        let match_expressions = match self.array(sel, "matchExpressions", &p)? {
            None => None,
            Some(items) => Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let ep = format!("{p}.matchExpressions[{i}]");
                        let m = self.element(v, &ep)?;
                        self.check_keys(m, &ep, &["key", "operator", "values"]);
                        Ok(LabelSelectorRequirement {
                            key: self.string(m, "key", &ep)?.unwrap_or_default(),
                            operator: self.string(m, "operator", &ep)?.unwrap_or_default(),
                            values: self.strings(m, "values", &ep)?,
                        })
                    })
                    .collect::<Result<Vec<_>, LoadError>>()?,
            ),
        };
        Ok(Some(LabelSelector {
            match_labels,
            match_expressions,
        }))
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::String(s) => format!("string {}", super::validation::go_quote(s)),
        Value::Number(n) => format!("number {n}"),
        Value::Bool(b) => format!("boolean {b}"),
        other => json_type(other).to_string(),
    }
}

/// Decodes one object (a document or a List item) into a configuration.
fn decode_object(
    value: Value,
    source: Source,
    item: Option<usize>,
) -> Result<LoadedConfiguration, LoadError> {
    let mut d = Decoder {
        source,
        unknown: Vec::new(),
        item,
    };
    let obj = match &value {
        Value::Object(m) => m,
        other => {
            return Err(LoadError::NotAnObject {
                at: d.source,
                found: json_type(other).to_string(),
            });
        }
    };
    let api_version = d.string(obj, "apiVersion", "")?.unwrap_or_default();
    let kind_str = d.string(obj, "kind", "")?.unwrap_or_default();
    let kind = match kind_str.as_str() {
        "MutatingWebhookConfiguration" => WebhookKind::Mutating,
        "ValidatingWebhookConfiguration" => WebhookKind::Validating,
        "ExternalAdmissionHookConfiguration" | "InitializerConfiguration" => {
            return Err(LoadError::Removed {
                at: d.source,
                item,
                kind: kind_str,
                api_version,
            });
        }
        _ if is_other_kind(&api_version, &kind_str) => {
            let name = obj
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .into();
            return Err(LoadError::OtherKind {
                at: d.source,
                item,
                kind: kind_str,
                api_version: api_version.into(),
                name,
            });
        }
        _ => {
            return Err(LoadError::UnknownKind {
                at: d.source,
                item,
                kind: kind_str,
                api_version,
            });
        }
    };
    if api_version != V1 && api_version != V1BETA1 {
        return Err(LoadError::UnsupportedVersion {
            at: d.source,
            item,
            kind: kind_str,
            api_version,
        });
    }
    d.check_keys(obj, "", &["apiVersion", "kind", "metadata", "webhooks"]);
    let (metadata, name) = d.metadata_and_name(obj)?;
    let webhooks = match d.array(obj, "webhooks", "")? {
        None => Vec::new(),
        Some(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let p = format!("webhooks[{i}]");
                let m = d.element(v, &p)?;
                d.webhook(m, &p, kind)
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    let configuration = WebhookConfiguration {
        kind,
        api_version,
        name,
        metadata,
        webhooks,
    };
    Ok(LoadedConfiguration {
        source: d.source,
        configuration,
        defaulted: Vec::new(),
        unknown_fields: d.unknown,
    })
}

/// The admission policy kinds of admissionregistration.k8s.io: not webhook configurations (the
/// validating ones are read by [`parse_policy_documents`]), but objects a manifest may hold.
const POLICY_KINDS: [&str; 4] = [
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
];

/// Whether a document of `kind` under `api_version` is an object of another kind rather than a
/// mistaken webhook configuration: both are set, and the kind is neither one spelled wrong (it
/// names no webhook configuration) nor another kind of admissionregistration.k8s.io than its
/// policies.
fn is_other_kind(api_version: &str, kind: &str) -> bool {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    !api_version.is_empty()
        && !kind.is_empty()
        && !kind.to_ascii_lowercase().contains("webhookconfiguration")
        && (group != GROUP || POLICY_KINDS.contains(&kind))
}

/// Read files or folders (folders recursively: `*.yaml`, `*.yml`, `*.json`, sorted by path) and
/// parse them. A file that cannot be read yields one error.
pub fn load_paths(paths: &[PathBuf]) -> Vec<Result<LoadedConfiguration, LoadError>> {
    load_paths_with(paths, parse_documents)
}

/// The ValidatingAdmissionPolicies and bindings of files or folders read as [`load_paths`] reads
/// them ([`parse_policy_documents`]); a file that cannot be read yields one error.
pub fn load_policy_paths(paths: &[PathBuf]) -> Vec<Result<super::policy::LoadedPolicy, LoadError>> {
    load_paths_with(paths, parse_policy_documents)
}

fn load_paths_with<T>(
    paths: &[PathBuf],
    parse: fn(&str, &str) -> Vec<Result<T, LoadError>>,
) -> Vec<Result<T, LoadError>> {
    let mut out = Vec::new();
    for p in paths {
        let mut files = Vec::new();
        if p.is_dir() {
            if let Err(e) = collect_dir(p, &mut files) {
                out.push(Err(LoadError::Io {
                    file: p.display().to_string(),
                    message: e.to_string(),
                }));
            }
            files.sort();
        } else {
            files.push(p.clone());
        }
        for f in files {
            let name = f.display().to_string();
            match std::fs::read(&f) {
                Err(e) => out.push(Err(LoadError::Io {
                    file: name,
                    message: e.to_string(),
                })),
                Ok(bytes) => match String::from_utf8(bytes) {
                    Err(_) => out.push(Err(LoadError::Io {
                        file: name,
                        message: "not UTF-8 text".into(),
                    })),
                    Ok(text) => out.extend(parse(text.trim_start_matches('\u{feff}'), &name)),
                },
            }
        }
    }
    out
}

fn collect_dir(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_dir(&path, files)?;
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
        {
            files.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_documents() {
        let docs = split_documents("a: 1\n---\nb: 2\n--- {c: 3}\n");
        assert_eq!(docs.len(), 3);
        assert_eq!(docs[1].first_line, 1);
        assert_eq!(docs[2].first_line, 3);
        assert_eq!(docs[2].text, "    {c: 3}\n");
        let docs = split_documents("---\na: 1\n");
        assert_eq!(docs.len(), 1);
        assert_eq!(split_documents("").len(), 1);
    }
}

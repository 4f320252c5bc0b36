//! Loading custom resources (for matchPolicy `Equivalent` and replay) from YAML or JSON.
//!
//! Accepted input: one or more YAML documents (`---`-separated) or JSON, each being
//! * an `apiextensions.k8s.io/v1` (or `v1beta1`) `CustomResourceDefinition`;
//! * a `List` / `CustomResourceDefinitionList` of them (`items`);
//! * an entry of the short format below, or a list of such entries (CRDs may be mixed in).
//!
//! Short format (field names follow the CRD spec):
//!
//! ```yaml
//! - group: example.com
//!   names: {plural: widgets, kind: Widget}
//!   scope: Namespaced            # or Cluster; default Namespaced
//!   subresources: [status]       # optional default for versions without their own
//!   versions:
//!   - name: v1
//!   - name: v2
//!     served: true               # optional, default true
//!     subresources: [status, scale]   # a list of names, or a CRD-style {status: {}, scale: {…}}
//! ```

use serde_json::Value;

/// One version of a custom resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomResourceVersion {
    /// Version name (`v1`).
    pub name: String,
    /// Whether the version is served (informational: upstream registers every listed version).
    pub served: bool,
    /// The version has the `status` subresource.
    pub status: bool,
    /// The version's `scale` subresource: where its Scale's fields live in the resource.
    pub scale: Option<ScalePaths>,
    /// The version's structural schema (`schema.openAPIV3Schema`, or `apiextensions.k8s.io/v1beta1`'s
    /// `spec.validation.openAPIV3Schema` shared by all versions), which types server-side apply of
    /// the resource; None when the definition gives none.
    pub schema: Option<std::sync::Arc<Value>>,
}

/// Where the `autoscaling/v1` Scale of a custom resource reads and writes its fields (the CRD's
/// `subresources.scale`): dotted JSON paths such as `.spec.replicas`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// `specReplicasPath`: the Scale's `spec.replicas`, written back on a scale.
    pub spec_replicas: String,
    /// `statusReplicasPath`: the Scale's `status.replicas`.
    pub status_replicas: String,
    /// `labelSelectorPath`: a string field the Scale's `status.selector` copies, if any.
    pub label_selector: Option<String>,
}

impl ScalePaths {
    /// The paths the short format's `subresources: [scale]` stands for.
    pub fn replicas() -> ScalePaths {
        ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
        }
    }

    /// The field names of a dotted path (`.spec.size` → `spec`, `size`), as upstream splits
    /// it (`splitReplicasPath`).
    pub fn fields(path: &str) -> impl Iterator<Item = &str> {
        path.strip_prefix('.').unwrap_or(path).split('.')
    }
}

/// A custom resource definition reduced to what the registry needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomResourceSpec {
    /// API group.
    pub group: String,
    /// Plural resource name (`names.plural`).
    pub plural: String,
    /// Kind (`names.kind`).
    pub kind: String,
    /// `scope: Namespaced` (true) or `Cluster` (false).
    pub namespaced: bool,
    /// Versions in definition order.
    pub versions: Vec<CustomResourceVersion>,
}

/// Why custom resources could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The text is not valid YAML/JSON.
    #[error("custom resources: cannot parse the text: {0}")]
    Parse(String),
    /// A required field is missing or empty.
    #[error("custom resources: document {document}, entry {entry}: missing field `{field}`")]
    MissingField {
        /// 1-based document number.
        document: usize,
        /// The entry (CRD `metadata.name`, else its position `#n`).
        entry: String,
        /// Field path (`spec.names.plural`).
        field: String,
    },
    /// A field has an unusable value.
    #[error("custom resources: document {document}, entry {entry}: field `{field}`: {message}")]
    InvalidField {
        /// 1-based document number.
        document: usize,
        /// The entry (CRD `metadata.name`, else its position `#n`).
        entry: String,
        /// Field path.
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// Parses custom resource definitions from YAML or JSON text (see the module documentation for
/// the accepted shapes).
pub fn load_custom_resources(text: &str) -> Result<Vec<CustomResourceSpec>, RegistryError> {
    let trimmed = text.trim_start();
    let documents: Vec<Value> = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        match crate::json::from_str(text) {
            Ok(v) => vec![v],
            Err(_) => yaml_documents(text)?,
        }
    } else {
        yaml_documents(text)?
    };
    let mut out = Vec::new();
    for (i, doc) in documents.iter().enumerate() {
        let document = i + 1;
        match doc {
            Value::Null => {}
            Value::Array(items) => {
                for (n, item) in items.iter().enumerate() {
                    out.push(entry(document, n + 1, item)?);
                }
            }
            Value::Object(map) => {
                let is_list = map.get("items").is_some_and(Value::is_array)
                    && !map.contains_key("spec")
                    && !map.contains_key("group");
                if is_list {
                    let items = map
                        .get("items")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten();
                    for (n, item) in items.enumerate() {
                        out.push(entry(document, n + 1, item)?);
                    }
                } else {
                    out.push(entry(document, 1, doc)?);
                }
            }
            _ => {
                return Err(RegistryError::InvalidField {
                    document,
                    entry: "#1".into(),
                    field: "(document)".into(),
                    message: "expected a mapping or a list".into(),
                });
            }
        }
    }
    Ok(out)
}

fn yaml_documents(text: &str) -> Result<Vec<Value>, RegistryError> {
    crate::yaml::from_multiple::<Value>(text).map_err(|e| RegistryError::Parse(e.to_string()))
}

/// Context for error messages of one entry.
struct Ctx<'a> {
    document: usize,
    entry: String,
    prefix: &'a str,
}

impl Ctx<'_> {
    fn missing(&self, field: &str) -> RegistryError {
        RegistryError::MissingField {
            document: self.document,
            entry: self.entry.clone(),
            field: format!("{}{field}", self.prefix),
        }
    }

    fn invalid(&self, field: &str, message: impl Into<String>) -> RegistryError {
        RegistryError::InvalidField {
            document: self.document,
            entry: self.entry.clone(),
            field: format!("{}{field}", self.prefix),
            message: message.into(),
        }
    }

    fn string(&self, obj: &Value, path: &[&str]) -> Result<Option<String>, RegistryError> {
        let mut cur = obj;
        for p in path {
            match cur.get(p) {
                Some(v) => cur = v,
                None => return Ok(None),
            }
        }
        match cur {
            Value::Null => Ok(None),
            Value::String(s) if s.is_empty() => Ok(None),
            Value::String(s) => Ok(Some(s.clone())),
            _ => Err(self.invalid(&path.join("."), "expected a string")),
        }
    }

    fn required(&self, obj: &Value, path: &[&str]) -> Result<String, RegistryError> {
        self.string(obj, path)?
            .ok_or_else(|| self.missing(&path.join(".")))
    }
}

fn entry(
    document: usize,
    position: usize,
    item: &Value,
) -> Result<CustomResourceSpec, RegistryError> {
    if !item.is_object() {
        return Err(RegistryError::InvalidField {
            document,
            entry: format!("#{position}"),
            field: "(entry)".into(),
            message: "expected a mapping".into(),
        });
    }
    let is_crd = item.get("spec").is_some()
        || item.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition");
    let name = item
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str);
    let entry = name.map_or_else(|| format!("#{position}"), str::to_string);
    let (spec, prefix) = if is_crd {
        (item.get("spec").unwrap_or(&Value::Null), "spec.")
    } else {
        (item, "")
    };
    let ctx = Ctx {
        document,
        entry,
        prefix,
    };
    if !spec.is_object() {
        return Err(ctx.missing(""));
    }
    let group = ctx.required(spec, &["group"])?;
    let plural = ctx.required(spec, &["names", "plural"])?;
    let kind = ctx.required(spec, &["names", "kind"])?;
    let namespaced = match ctx.string(spec, &["scope"])?.as_deref() {
        None | Some("Namespaced") => true,
        Some("Cluster") => false,
        Some(other) => {
            return Err(ctx.invalid(
                "scope",
                format!("{other:?} is neither Namespaced nor Cluster"),
            ));
        }
    };
    let default_subs = subresources(&ctx, spec.get("subresources"), "subresources")?;
    let open_api = |v: Option<&Value>| {
        v.and_then(|v| v.get("openAPIV3Schema"))
            .filter(|s| s.is_object())
            .map(|s| std::sync::Arc::new(s.clone()))
    };
    let default_schema = open_api(spec.get("validation"));
    let mut versions = Vec::new();
    match spec.get("versions") {
        Some(Value::Array(list)) if !list.is_empty() => {
            for (i, v) in list.iter().enumerate() {
                let field = format!("versions[{i}]");
                let name = match v {
                    Value::String(s) if !s.is_empty() => s.clone(),
                    Value::Object(_) => ctx
                        .string(v, &["name"])
                        .map_err(|_| ctx.invalid(&format!("{field}.name"), "expected a string"))?
                        .ok_or_else(|| ctx.missing(&format!("{field}.name")))?,
                    _ => return Err(ctx.invalid(&field, "expected a mapping with `name`")),
                };
                let served = match v.get("served") {
                    None | Some(Value::Null) => true,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => {
                        return Err(ctx.invalid(&format!("{field}.served"), "expected a boolean"));
                    }
                };
                let subs = match v.get("subresources") {
                    None | Some(Value::Null) => default_subs.clone(),
                    some => subresources(&ctx, some, &format!("{field}.subresources"))?,
                };
                let (status, scale) = subs;
                versions.push(CustomResourceVersion {
                    name,
                    served,
                    status,
                    scale,
                    schema: open_api(v.get("schema")).or_else(|| default_schema.clone()),
                });
            }
        }
        Some(Value::Array(_)) | None | Some(Value::Null) => {
            // apiextensions.k8s.io/v1beta1 allowed a single `spec.version`.
            let name = ctx
                .string(spec, &["version"])?
                .ok_or_else(|| ctx.missing("versions"))?;
            let (status, scale) = default_subs;
            versions.push(CustomResourceVersion {
                name,
                served: true,
                status,
                scale,
                schema: default_schema,
            });
        }
        Some(_) => return Err(ctx.invalid("versions", "expected a list")),
    }
    Ok(CustomResourceSpec {
        group,
        plural,
        kind,
        namespaced,
        versions,
    })
}

/// `(status, scale)` from a list of names or a CRD-style mapping (where `scale` names its paths,
/// the replicas paths required as the apiserver requires them).
fn subresources(
    ctx: &Ctx<'_>,
    value: Option<&Value>,
    field: &str,
) -> Result<(bool, Option<ScalePaths>), RegistryError> {
    let mut status = false;
    let mut scale = None;
    let scale_paths = |v: &Value| -> Result<ScalePaths, RegistryError> {
        let Value::Object(map) = v else {
            return Ok(ScalePaths::replicas());
        };
        let at = |key: &str| format!("{field}.scale.{key}");
        let path = |key: &str| match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone()).filter(|s| !s.is_empty())),
            Some(_) => Err(ctx.invalid(&at(key), "expected a string")),
        };
        let required = |key: &str| path(key)?.ok_or_else(|| ctx.missing(&at(key)));
        Ok(ScalePaths {
            spec_replicas: required("specReplicasPath")?,
            status_replicas: required("statusReplicasPath")?,
            label_selector: path("labelSelectorPath")?,
        })
    };
    let mut set = |name: &str, v: &Value| match name {
        "status" => {
            status = true;
            Ok(())
        }
        "scale" => {
            scale = Some(scale_paths(v)?);
            Ok(())
        }
        other => Err(ctx.invalid(
            field,
            format!("unknown subresource {other:?} (status, scale)"),
        )),
    };
    match value {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for v in list {
                match v.as_str() {
                    Some(name) => set(name, &Value::Null)?,
                    None => return Err(ctx.invalid(field, "expected subresource names")),
                }
            }
        }
        Some(Value::Object(map)) => {
            for (name, v) in map {
                if !v.is_null() {
                    set(name, v)?;
                }
            }
        }
        Some(_) => return Err(ctx.invalid(field, "expected a list or a mapping")),
    }
    Ok((status, scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_format_with_defaults() {
        let specs = load_custom_resources(
            "- group: example.com\n  names: {plural: widgets, kind: Widget}\n  subresources: [status]\n  versions: [{name: v1}, {name: v2, subresources: [scale]}]\n",
        )
        .expect("loads");
        assert_eq!(specs.len(), 1);
        let s = &specs[0];
        assert!(s.namespaced);
        assert_eq!(s.versions.len(), 2);
        assert!(s.versions[0].status && s.versions[0].scale.is_none());
        assert!(!s.versions[1].status);
        assert_eq!(s.versions[1].scale, Some(ScalePaths::replicas()));
    }

    #[test]
    fn errors_name_document_entry_and_field() {
        let err = load_custom_resources(
            "---\ngroup: a.io\nnames: {plural: as, kind: A}\nversions: [{name: v1}]\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: bs.b.io}\nspec:\n  group: b.io\n  names: {kind: B}\n  scope: Namespaced\n  versions: [{name: v1}]\n",
        )
        .expect_err("plural missing");
        assert_eq!(
            err,
            RegistryError::MissingField {
                document: 2,
                entry: "bs.b.io".into(),
                field: "spec.names.plural".into()
            }
        );
        let err = load_custom_resources("[{\"group\": \"a\", \"names\": {\"plural\": \"as\", \"kind\": \"A\"}, \"scope\": \"Global\", \"versions\": [\"v1\"]}]")
            .expect_err("bad scope");
        assert!(err.to_string().contains("field `scope`"), "{err}");
    }

    #[test]
    fn v1beta1_single_version_and_lists() {
        let specs = load_custom_resources(
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: apiextensions.k8s.io/v1beta1\n  kind: CustomResourceDefinition\n  metadata: {name: olds.x.io}\n  spec:\n    group: x.io\n    version: v1alpha1\n    scope: Cluster\n    names: {plural: olds, kind: Old}\n    subresources: {status: {}}\n",
        )
        .expect("loads");
        assert_eq!(specs[0].versions[0].name, "v1alpha1");
        assert!(specs[0].versions[0].status);
        assert!(!specs[0].namespaced);
    }

    #[test]
    fn each_version_keeps_its_schema_and_v1beta1_shares_its_validation() {
        let specs = load_custom_resources(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: as.a.io}\nspec:\n  group: a.io\n  names: {plural: as, kind: A}\n  versions:\n  - name: v1\n    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: string}}}}\n  - name: v2\n---\napiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata: {name: bs.b.io}\nspec:\n  group: b.io\n  names: {plural: bs, kind: B}\n  validation: {openAPIV3Schema: {type: object}}\n  versions: [{name: v1}, {name: v2}]\n",
        )
        .expect("loads");
        let schema = |i: usize, v: usize| specs[i].versions[v].schema.as_deref().cloned();
        assert_eq!(
            schema(0, 0),
            Some(serde_json::json!({"type": "object", "properties": {"spec": {"type": "string"}}}))
        );
        assert_eq!(schema(0, 1), None);
        assert_eq!(schema(1, 0), Some(serde_json::json!({"type": "object"})));
        assert_eq!(schema(1, 1), schema(1, 0));
    }
}

//! A custom resource's schema as a [`TypeModel`]: what kube-apiserver's field manager walks for
//! a custom resource, built from the structural `openAPIV3Schema` of the served version of its
//! CustomResourceDefinition as apiextensions-apiserver builds it (the CRD's OpenAPI, then
//! kube-openapi's `schemaconv` to structured-merge-diff's schema).
//!
//! - `type: object` is a map: its `properties` are named fields, its `additionalProperties` the
//!   type of any other key; without either (or under `x-kubernetes-preserve-unknown-fields`,
//!   which holds for the whole subtree) other keys are deduced. `x-kubernetes-map-type: atomic`
//!   replaces it whole, `granular` (the default) merges it key by key.
//! - `type: array` is a list: `x-kubernetes-list-type: atomic` (the default) replaced whole,
//!   `set` told apart by value, `map` by the `x-kubernetes-list-map-keys` fields (whose `default`
//!   fills a key an item omits).
//! - a schema without a type (`x-kubernetes-int-or-string`, `x-kubernetes-preserve-unknown-fields`
//!   alone) is untyped: a granular map of deduced members when the value is an object, else
//!   replaced whole.
//! - the root gets `apiVersion`, `kind` and `metadata` (the release's `ObjectMeta`), and so does
//!   every `x-kubernetes-embedded-resource` object.

use serde_json::Value;

use super::go::{GoModel, GoType};
use super::typed::{Atom, ListRelationship, TypeModel};
use crate::schema::{Schema, TypeId};

/// A custom resource's schema, walked by server-side apply.
#[derive(Debug, Clone)]
pub struct CrdModel<'s> {
    go: GoModel<'s>,
    meta: Option<TypeId>,
    nodes: Vec<Node<'s>>,
    /// The structural schema, for its defaults.
    openapi: Value,
}

/// A type in a [`CrdModel`]: a node of the CRD's schema, or a type of `ObjectMeta`.
#[derive(Debug, Clone, Copy)]
pub enum CrdType<'s> {
    /// A node of the schema (the root is node 0).
    Node(usize),
    /// `metadata`, or a type inside it.
    Meta(GoType<'s>),
}

#[derive(Debug, Clone)]
enum Node<'s> {
    Scalar,
    Deduced,
    List {
        relationship: Relationship,
        keys: Vec<Box<str>>,
        item: CrdType<'s>,
    },
    Map {
        atomic: bool,
        fields: Vec<Field<'s>>,
        element: Option<CrdType<'s>>,
    },
}

#[derive(Debug, Clone, Copy)]
enum Relationship {
    Atomic,
    Set,
    Map,
}

#[derive(Debug, Clone)]
struct Field<'s> {
    name: Box<str>,
    ty: CrdType<'s>,
    default: Option<Value>,
}

/// Why a CRD's schema cannot be turned into structured-merge-diff's (kube-openapi's words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CrdSchemaError(pub String);

impl<'s> CrdModel<'s> {
    /// The model of a custom resource whose version's schema is `openapi` (its
    /// `openAPIV3Schema`), with `metadata` typed by `schema`'s `ObjectMeta`.
    pub fn new(schema: &'s Schema, openapi: &Value) -> Result<CrdModel<'s>, CrdSchemaError> {
        let mut model = CrdModel {
            go: GoModel(schema),
            meta: schema.by_name("meta/v1.ObjectMeta"),
            nodes: vec![Node::Scalar],
            openapi: openapi.clone(),
        };
        let root = model.node(openapi, false, true)?;
        model.nodes[0] = root;
        Ok(model)
    }

    /// The type of the whole object.
    pub fn root(&self) -> CrdType<'s> {
        CrdType::Node(0)
    }

    /// Applies the schema's `default`s to `object` as apiextensions-apiserver's structural
    /// defaulting does (the field manager defaults the object an apply merged): a property
    /// missing from an object, or `null` where the schema is not `nullable`, takes its default;
    /// so does a `null` item of a list or value of `additionalProperties`; then every member and
    /// item is defaulted in turn.
    pub fn default_object(&self, object: &mut Value) {
        structural_default(object, &self.openapi);
    }

    fn push(&mut self, node: Node<'s>) -> CrdType<'s> {
        self.nodes.push(node);
        CrdType::Node(self.nodes.len() - 1)
    }

    fn child(&mut self, s: &Value, preserve: bool) -> Result<CrdType<'s>, CrdSchemaError> {
        let node = self.node(s, preserve, false)?;
        Ok(self.push(node))
    }

    /// The node of schema `s`; `preserve` when an enclosing schema preserves unknown fields;
    /// `resource` when `s` describes a whole object (the root, an embedded resource).
    fn node(
        &mut self,
        s: &Value,
        preserve: bool,
        resource: bool,
    ) -> Result<Node<'s>, CrdSchemaError> {
        let flag = |k: &str| s.get(k).and_then(Value::as_bool).unwrap_or(false);
        let preserve = preserve || flag("x-kubernetes-preserve-unknown-fields");
        let resource = resource || flag("x-kubernetes-embedded-resource");
        let ty = s.get("type").and_then(Value::as_str).unwrap_or_default();
        match ty {
            "object" => self.object(s, preserve, resource),
            "array" => self.list(s, preserve),
            "integer" | "boolean" | "number" | "string" => Ok(Node::Scalar),
            "" if resource || s.get("properties").is_some() => self.object(s, preserve, resource),
            "" => Ok(Node::Deduced),
            other => Err(CrdSchemaError(format!("unrecognized type: '{other}'"))),
        }
    }

    fn object(
        &mut self,
        s: &Value,
        preserve: bool,
        resource: bool,
    ) -> Result<Node<'s>, CrdSchemaError> {
        let atomic = match s.get("x-kubernetes-map-type") {
            None | Some(Value::Null) => false,
            Some(Value::String(t)) if t == "atomic" => true,
            Some(Value::String(t)) if t == "granular" => false,
            Some(other) => {
                return Err(CrdSchemaError(format!(
                    "unknown map type {}",
                    other
                        .as_str()
                        .map_or_else(|| other.to_string(), String::from)
                )));
            }
        };
        let mut fields = Vec::new();
        if let Some(Value::Object(props)) = s.get("properties") {
            for (name, member) in props {
                if resource && matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let ty = self.child(member, preserve)?;
                fields.push(Field {
                    name: name.as_str().into(),
                    ty,
                    default: member.get("default").cloned(),
                });
            }
        }
        if resource {
            for name in ["apiVersion", "kind"] {
                let ty = self.push(Node::Scalar);
                fields.push(Field {
                    name: name.into(),
                    ty,
                    default: None,
                });
            }
            let ty = match self.meta {
                Some(id) => CrdType::Meta(GoType::Struct(id)),
                None => self.push(Node::Deduced),
            };
            fields.push(Field {
                name: "metadata".into(),
                ty,
                default: None,
            });
        }
        let element = match s.get("additionalProperties") {
            Some(schema @ Value::Object(_)) => Some(self.child(schema, preserve)?),
            Some(Value::Bool(true)) => Some(self.push(Node::Deduced)),
            Some(Value::Bool(false)) => None,
            _ if preserve || fields.is_empty() => Some(self.push(Node::Deduced)),
            _ => None,
        };
        Ok(Node::Map {
            atomic,
            fields,
            element,
        })
    }

    fn list(&mut self, s: &Value, preserve: bool) -> Result<Node<'s>, CrdSchemaError> {
        let (relationship, keys) = match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
            None | Some("atomic") => (Relationship::Atomic, Vec::new()),
            Some("set") => (Relationship::Set, Vec::new()),
            Some("map") => {
                let keys = match s.get("x-kubernetes-list-map-keys") {
                    Some(Value::Array(keys)) => keys
                        .iter()
                        .map(|k| k.as_str().map(Box::from))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| {
                            CrdSchemaError(format!("uninterpreted map keys: {}", keys.len()))
                        })?,
                    _ => return Err(CrdSchemaError("missing map keys".into())),
                };
                (Relationship::Map, keys)
            }
            Some(other) => return Err(CrdSchemaError(format!("unknown list type {other}"))),
        };
        let item = match s.get("items") {
            Some(items @ Value::Object(_)) => self.child(items, preserve)?,
            _ => self.push(Node::Scalar),
        };
        Ok(Node::List {
            relationship,
            keys,
            item,
        })
    }

    fn get(&self, i: usize) -> &Node<'s> {
        &self.nodes[i]
    }
}

/// Whether `x` is a `null` that schema `s` does not allow (`isNonNullableNull`).
fn non_nullable_null(x: &Value, s: &Value) -> bool {
    x.is_null() && !s.get("nullable").and_then(Value::as_bool).unwrap_or(false)
}

/// The default of schema `s`, if it has one (a `null` default is none).
fn default_of(s: &Value) -> Option<&Value> {
    s.get("default").filter(|d| !d.is_null())
}

fn structural_default(x: &mut Value, s: &Value) {
    match x {
        Value::Object(members) => {
            let props = s.get("properties").and_then(Value::as_object);
            for (k, prop) in props.into_iter().flatten() {
                let Some(default) = default_of(prop) else {
                    continue;
                };
                if members.get(k).is_none_or(|v| non_nullable_null(v, prop)) {
                    members.insert(k.clone(), default.clone());
                }
            }
            let additional = s.get("additionalProperties").filter(|a| a.is_object());
            for (k, v) in members.iter_mut() {
                match (props.and_then(|p| p.get(k)), additional) {
                    (Some(prop), _) => structural_default(v, prop),
                    (None, Some(a)) => {
                        if non_nullable_null(v, a) {
                            *v = default_of(a).cloned().unwrap_or(Value::Null);
                        }
                        structural_default(v, a);
                    }
                    (None, None) => {}
                }
            }
        }
        Value::Array(items) => {
            let Some(item) = s.get("items").filter(|i| i.is_object()) else {
                return;
            };
            for v in items.iter_mut() {
                if non_nullable_null(v, item) {
                    *v = default_of(item).cloned().unwrap_or(Value::Null);
                }
                structural_default(v, item);
            }
        }
        _ => {}
    }
}

impl<'s> TypeModel for CrdModel<'s> {
    type Type = CrdType<'s>;

    fn atom(&self, ty: &CrdType<'s>) -> Atom<'_> {
        match ty {
            CrdType::Meta(g) => self.go.atom(g),
            CrdType::Node(i) => match self.get(*i) {
                Node::Scalar => Atom::Scalar,
                Node::Deduced => Atom::Deduced,
                Node::List {
                    relationship, keys, ..
                } => Atom::List(match relationship {
                    Relationship::Atomic => ListRelationship::Atomic,
                    Relationship::Set => ListRelationship::Set,
                    Relationship::Map => ListRelationship::Map(keys),
                }),
                Node::Map { atomic, .. } => Atom::Map { atomic: *atomic },
            },
        }
    }

    fn element(&self, ty: &CrdType<'s>) -> Option<CrdType<'s>> {
        match ty {
            CrdType::Meta(g) => self.go.element(g).map(CrdType::Meta),
            CrdType::Node(i) => match self.get(*i) {
                Node::List { item, .. } => Some(*item),
                _ => None,
            },
        }
    }

    fn field(&self, ty: &CrdType<'s>, name: &str) -> Option<(CrdType<'s>, bool)> {
        match ty {
            CrdType::Meta(g) => self.go.field(g, name).map(|(t, n)| (CrdType::Meta(t), n)),
            CrdType::Node(i) => match self.get(*i) {
                Node::Map {
                    fields, element, ..
                } => match fields.iter().find(|f| &*f.name == name) {
                    Some(f) => Some((f.ty, true)),
                    None => element.map(|e| (e, false)),
                },
                _ => None,
            },
        }
    }

    fn key_default(&self, item: &CrdType<'s>, key: &str) -> Option<Value> {
        match item {
            CrdType::Meta(g) => self.go.key_default(g, key),
            CrdType::Node(i) => match self.get(*i) {
                Node::Map { fields, .. } => fields
                    .iter()
                    .find(|f| &*f.name == key)
                    .and_then(|f| f.default.clone()),
                _ => None,
            },
        }
    }

    fn optional_keys(&self) -> bool {
        self.go.optional_keys()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::apply::{ApplyError, ManagedFields, Request, apply_custom};
    use crate::version::KubeVersion;

    fn schema() -> &'static Schema {
        Schema::for_release(KubeVersion::new(33).unwrap())
    }

    /// The `spec` of `tests/fixtures/custom-apply-v1.33`'s CRD, with a nested object under
    /// `config` that declares a property of its own.
    fn openapi() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "size": {"type": "integer"},
                        "ports": {
                            "type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name", "protocol"],
                            "items": {"type": "object", "properties": {
                                "name": {"type": "string"},
                                "protocol": {"type": "string", "default": "TCP"},
                                "port": {"type": "integer"}}}
                        },
                        "tags": {"type": "array", "x-kubernetes-list-type": "set",
                                 "items": {"type": "string"}},
                        "args": {"type": "array", "items": {"type": "string"}},
                        "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                                     "additionalProperties": {"type": "string"}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                   "properties": {"known": {"type": "object",
                                       "properties": {"a": {"type": "integer"}}}}},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                     "x-kubernetes-preserve-unknown-fields": true},
                        "target": {"x-kubernetes-int-or-string": true},
                        "closed": {"type": "object", "properties": {"x": {"type": "string"}}}
                    }
                }
            }
        })
    }

    fn at<'s>(m: &CrdModel<'s>, path: &[&str]) -> Option<(CrdType<'s>, bool)> {
        let mut ty = (m.root(), true);
        for name in path {
            ty = m.field(&ty.0, name)?;
        }
        Some(ty)
    }

    fn atom_of(m: &CrdModel<'_>, path: &[&str]) -> String {
        let (ty, _) = at(m, path).expect("declared");
        format!("{:?}", m.atom(&ty))
    }

    #[test]
    fn list_and_map_types_follow_the_crd_extensions() {
        let m = CrdModel::new(schema(), &openapi()).expect("model");
        assert_eq!(
            atom_of(&m, &["spec", "ports"]),
            r#"List(Map(["name", "protocol"]))"#
        );
        assert_eq!(atom_of(&m, &["spec", "tags"]), "List(Set)");
        assert_eq!(atom_of(&m, &["spec", "args"]), "List(Atomic)");
        assert_eq!(atom_of(&m, &["spec", "selector"]), "Map { atomic: true }");
        assert_eq!(atom_of(&m, &["spec", "labels"]), "Map { atomic: false }");
        assert_eq!(atom_of(&m, &["spec", "size"]), "Scalar");
        assert_eq!(atom_of(&m, &["spec", "target"]), "Deduced");
        // A key field's default fills an item that omits it.
        let ports = at(&m, &["spec", "ports"]).unwrap().0;
        let item = m.element(&ports).unwrap();
        assert_eq!(m.key_default(&item, "protocol"), Some(json!("TCP")));
        assert_eq!(m.key_default(&item, "name"), None);
        // Map keys are not named fields; undeclared fields of a closed object do not exist.
        assert_eq!(at(&m, &["spec", "labels", "any"]).map(|t| t.1), Some(false));
        assert!(at(&m, &["spec", "closed", "y"]).is_none());
        assert!(at(&m, &["spec", "nope"]).is_none());
    }

    #[test]
    fn unknown_fields_are_deduced_under_preserve_unknown_fields_and_resources_get_object_meta() {
        let m = CrdModel::new(schema(), &openapi()).expect("model");
        // Undeclared members of a preserving object, and of the objects it declares, are deduced.
        assert_eq!(atom_of(&m, &["spec", "config", "other"]), "Deduced");
        assert_eq!(atom_of(&m, &["spec", "config", "known", "b"]), "Deduced");
        assert_eq!(atom_of(&m, &["spec", "config", "known", "a"]), "Scalar");
        // The root and an embedded resource carry ObjectMeta, typed as the release types it.
        for base in [&[][..], &["spec", "template"]] {
            let meta = [base, &["metadata"]].concat();
            assert!(matches!(at(&m, &meta).unwrap().0, CrdType::Meta(_)));
            let owners = [base, &["metadata", "ownerReferences"]].concat();
            assert_eq!(atom_of(&m, &owners), r#"List(Map(["uid"]))"#);
            let kind = [base, &["kind"]].concat();
            assert_eq!(atom_of(&m, &kind), "Scalar");
        }
    }

    #[test]
    fn schemas_the_apiserver_cannot_convert_are_refused_with_its_words() {
        let cases = [
            (
                json!({"type": "array", "x-kubernetes-list-type": "bag"}),
                "unknown list type bag",
            ),
            (
                json!({"type": "array", "x-kubernetes-list-type": "map"}),
                "missing map keys",
            ),
            (
                json!({"type": "object", "x-kubernetes-map-type": "loose"}),
                "unknown map type loose",
            ),
            (json!({"type": "date"}), "unrecognized type: 'date'"),
        ];
        for (spec, want) in cases {
            let openapi = json!({"type": "object", "properties": {"spec": spec}});
            let err = CrdModel::new(schema(), &openapi).expect_err(want);
            assert_eq!(err.0, want);
        }
    }

    /// An apply of `config` by `manager` to `live` under Kubernetes 1.`minor`.
    fn apply_as(
        minor: u32,
        manager: &str,
        force: bool,
        live: Option<&Value>,
        config: &Value,
        managed: &ManagedFields,
    ) -> Result<(Value, ManagedFields), ApplyError> {
        let release = KubeVersion::new(minor).unwrap();
        let m = CrdModel::new(Schema::for_release(release), &openapi()).expect("model");
        let time = "2026-01-01T00:00:00Z";
        apply_custom(
            &m,
            release,
            live,
            config,
            &request(manager, time, force),
            managed,
        )
    }

    fn request<'a>(manager: &'a str, time: &'a str, force: bool) -> Request<'a> {
        Request {
            manager,
            api_version: "example.com/v1",
            kind: "Gadget",
            time,
            force,
            subresource: "",
            reset_fields: None,
        }
    }

    #[test]
    fn applies_merge_map_lists_by_key_and_conflicts_are_worded_as_the_apiserver_words_them() {
        let gadget = |spec: Value| {
            json!({"apiVersion": "example.com/v1", "kind": "Gadget",
                "metadata": {"name": "g", "namespace": "crs"}, "spec": spec})
        };
        let alpha =
            gadget(json!({"size": 1, "ports": [{"name": "http", "port": 80}], "tags": ["a"]}));
        let none = ManagedFields::default();
        let (created, managed) = apply_as(33, "alpha", false, None, &alpha, &none).expect("create");
        let beta = gadget(
            json!({"ports": [{"name": "http", "protocol": "UDP", "port": 53}], "tags": ["b"]}),
        );
        let (merged, managed) =
            apply_as(33, "beta", false, Some(&created), &beta, &managed).expect("merge");
        assert_eq!(
            merged["spec"]["ports"],
            json!([{"name": "http", "port": 80, "protocol": "TCP"}, {"name": "http", "protocol": "UDP", "port": 53}])
        );
        assert_eq!(merged["spec"]["tags"], json!(["a", "b"]));
        let owned = |m: &ManagedFields, manager: &str| {
            m.applier(manager).unwrap().fields.to_fields_v1_string()
        };
        assert_eq!(
            owned(&managed, "alpha"),
            r#"{"f:spec":{"f:ports":{"k:{\"name\":\"http\",\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{}}},"f:size":{},"f:tags":{"v:\"a\"":{}}}}"#
        );
        let takeover = gadget(json!({"size": 2}));
        let err =
            apply_as(33, "beta", false, Some(&merged), &takeover, &managed).expect_err("conflict");
        assert_eq!(
            err.to_string(),
            r#"Apply failed with 1 conflict: conflict with "alpha": .spec.size"#
        );
        assert_eq!(err.status().code, 409);
        let (forced, managed) =
            apply_as(33, "beta", true, Some(&merged), &takeover, &managed).expect("forced");
        assert_eq!(forced["spec"]["size"], 2);
        // beta no longer applies its port and tag: they go; alpha's stay.
        assert_eq!(
            forced["spec"]["ports"],
            json!([{"name": "http", "port": 80, "protocol": "TCP"}])
        );
        assert_eq!(forced["spec"]["tags"], json!(["a"]));
        assert!(!owned(&managed, "alpha").contains("size"));
    }

    #[test]
    fn a_configuration_with_a_field_the_schema_does_not_declare_is_refused() {
        let config = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
            "metadata": {"name": "g", "namespace": "crs"}, "spec": {"colour": "red"}});
        let err = apply_as(33, "alpha", false, None, &config, &ManagedFields::default())
            .expect_err("undeclared");
        assert!(matches!(err, ApplyError::Invalid(_)));
        assert_eq!(
            err.to_string(),
            "failed to create typed patch object (crs/g; example.com/v1, Kind=Gadget): .spec.colour: field not declared in schema"
        );
    }

    /// structured-merge-diff v4 (before Kubernetes 1.34) refuses an item that omits a key field
    /// without a default; v6 takes it as another entry.
    #[test]
    fn an_item_without_a_key_is_refused_before_1_34_and_taken_from_1_34() {
        let config = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
            "metadata": {"name": "g", "namespace": "crs"}, "spec": {"ports": [{"port": 1}]}});
        let none = ManagedFields::default();
        let err = apply_as(33, "alpha", false, None, &config, &none).expect_err("1.33");
        assert_eq!(
            err.to_string(),
            r#"failed to create typed patch object (crs/g; example.com/v1, Kind=Gadget): .spec.ports: element 0: associative list with keys has an element that omits key field "name" (and doesn't have default value)"#
        );
        let (object, _) = apply_as(34, "alpha", false, None, &config, &none).expect("1.34");
        // The key's default is filled in by defaulting afterwards.
        assert_eq!(
            object["spec"]["ports"],
            json!([{"port": 1, "protocol": "TCP"}])
        );
    }

    /// apiextensions-apiserver's structural defaulting, as its own `TestDefault` exercises it:
    /// missing properties and non-nullable nulls take their default, a default is then defaulted
    /// inside, nullable nulls stay, items and additionalProperties values are defaulted.
    #[test]
    fn the_merged_object_takes_the_schema_defaults() {
        let openapi = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {
            "a": {"type": "string", "default": "A"},
            "b": {"type": "string", "default": "B", "nullable": true},
            "c": {"type": "string", "default": "C"},
            "d": {"type": "object", "default": {},
                  "properties": {"e": {"type": "integer", "default": 1}}},
            "list": {"type": "array", "items": {"type": "object", "default": {"z": 0},
                     "properties": {"z": {"type": "integer"}, "y": {"type": "string", "default": "Y"}}}},
            "map": {"type": "object", "additionalProperties": {"type": "object",
                    "properties": {"x": {"type": "boolean", "default": true}}}},
            "none": {"type": "string", "default": null}
        }}}});
        let m = CrdModel::new(schema(), &openapi).expect("model");
        let mut object = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
            "spec": {"b": null, "c": null, "list": [{"z": 5}, null], "map": {"k": {}, "n": null}}});
        m.default_object(&mut object);
        assert_eq!(
            object["spec"],
            json!({"a": "A", "b": null, "c": "C", "d": {"e": 1},
                   "list": [{"z": 5, "y": "Y"}, {"z": 0, "y": "Y"}],
                   "map": {"k": {"x": true}, "n": null}})
        );
    }
}

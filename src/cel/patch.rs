//! The mutation types of MutatingAdmissionPolicy expressions (`k8s.io/apiserver/pkg/cel/
//! mutation`): `Object{…}` / `Object.<field path>{…}` literals for ApplyConfiguration and
//! `JSONPatch{op, path, from, value}` literals for JSONPatch, built at run time as opaque values
//! and turned into JSON as the patchers do (`ObjectVal.Value`, `JSONPatchVal` and the
//! `structpb` conversion of values).

use std::fmt::Write as _;
use std::sync::Arc;

use kube_cel::cel;

use cel::objects::{Key, Opaque, Value};
use cel::{FunctionContext, ResolveResult};

use super::{Document, Inputs, Program, Variables, run};

/// The function a struct literal is rewritten into: `@hs.struct("TypeName", {"field": value})`.
pub(super) const STRUCT_FN: &str = "@hs.struct";

/// The root type of ApplyConfiguration objects.
const OBJECT: &str = "Object";
/// The type of a JSON patch operation.
const JSON_PATCH: &str = "JSONPatch";

/// Whether a struct literal's type name is one the mutation environment declares.
pub(super) fn is_patch_type(name: &str) -> bool {
    name == OBJECT || name == JSON_PATCH || name.starts_with("Object.")
}

/// A value of a struct literal: its type name and fields (a CEL map with string keys).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct StructValue {
    pub(super) type_name: Arc<str>,
    pub(super) fields: Value,
}

impl Eq for StructValue {}

impl Opaque for StructValue {
    fn runtime_type_name(&self) -> &str {
        &self.type_name
    }
}

impl StructValue {
    /// A field's value, when set.
    pub(super) fn field(&self, name: &str) -> Option<&Value> {
        match &self.fields {
            Value::Map(m) => m.map.get(&Key::String(Arc::new(name.to_string()))),
            _ => None,
        }
    }
}

/// Go's `%T` of what a cel-go value's `Value()` returns, for the JSONPatch field errors.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Int(_) => "int64",
        Value::UInt(_) => "uint64",
        Value::Float(_) => "float64",
        Value::Bool(_) => "bool",
        Value::String(_) => "string",
        Value::Bytes(_) => "[]uint8",
        Value::Null => "structpb.NullValue",
        Value::List(_) => "[]ref.Val",
        Value::Map(_) => "map[ref.Val]ref.Val",
        _ => "*dynamic.ObjectVal",
    }
}

/// Builds a struct literal's value (`JSONPatchType.Val` / `ObjectType.Val`).
pub(super) fn struct_fn(ftx: &FunctionContext, name: Arc<String>, fields: Value) -> ResolveResult {
    if name.as_str() == JSON_PATCH
        && let Value::Map(m) = &fields
    {
        for (k, v) in m.map.iter() {
            let Key::String(k) = k else { continue };
            match k.as_str() {
                "op" | "path" | "from" => {
                    if !matches!(v, Value::String(_)) {
                        return Err(ftx.error(format!(
                            "unexpected type {} for JSONPatchType '{k}' field",
                            go_type(v)
                        )));
                    }
                }
                "value" => {}
                other => {
                    return Err(ftx.error(format!("unexpected JSONPatchType field: {other}")));
                }
            }
        }
    }
    Ok(Value::Opaque(Arc::new(StructValue {
        type_name: Arc::from(name.as_str()),
        fields,
    })))
}

/// Where a value sits below the root `Object`, to check the type names of nested literals
/// (`CheckTypeNamesMatchFieldPathNames`).
fn type_check(v: &Value, path: &mut Vec<String>, errors: &mut Vec<String>) {
    match v {
        Value::Opaque(o) => {
            if let Some(s) = o.downcast_ref::<StructValue>() {
                let expected = path.join(".");
                if *s.type_name != *expected {
                    errors.push(format!(
                        "unexpected type name {:?}, expected {expected:?}, which matches field name path from root Object type",
                        &*s.type_name
                    ));
                }
                if let Value::Map(m) = &s.fields {
                    for (k, f) in m.map.iter() {
                        if let Key::String(k) = k {
                            path.push(k.to_string());
                            type_check(f, path, errors);
                            path.pop();
                        }
                    }
                }
            }
        }
        Value::List(items) => {
            for i in items.iter() {
                type_check(i, path, errors);
            }
        }
        Value::Map(m) => {
            for f in m.map.values() {
                type_check(f, path, errors);
            }
        }
        _ => {}
    }
}

fn check_names(root: &StructValue) -> Result<(), String> {
    let mut errors = Vec::new();
    type_check(
        &Value::Opaque(Arc::new(root.clone())),
        &mut vec![root.type_name.to_string()],
        &mut errors,
    );
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("type mismatch: {}", errors.join("\n")))
    }
}

/// A CEL value as the JSON the patchers produce from it.
fn to_json(v: &Value) -> Result<serde_json::Value, String> {
    use serde_json::Value as J;
    Ok(match v {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => J::from(*i),
        Value::UInt(u) => J::from(*u),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        Value::String(s) => J::String(s.to_string()),
        Value::Bytes(b) => {
            use base64::Engine as _;
            J::String(base64::engine::general_purpose::STANDARD.encode(b.as_slice()))
        }
        Value::List(items) => J::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Value::Map(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m.map.iter() {
                let Key::String(k) = k else {
                    return Err(format!("map key {k:?} is not a string"));
                };
                out.insert(k.to_string(), to_json(v)?);
            }
            J::Object(out)
        }
        Value::Opaque(o) => {
            if let Some(s) = o.downcast_ref::<StructValue>() {
                to_json(&s.fields)?
            } else if let Some(d) = o.downcast_ref::<Document>() {
                match d {
                    Document::Json(part) => part.get().clone(),
                    Document::Value(v) => to_json(v)?,
                }
            } else {
                return Err(format!(
                    "unable to convert {} to JSON",
                    o.runtime_type_name()
                ));
            }
        }
        Value::Timestamp(t) => J::String(t.to_rfc3339()),
        Value::Duration(d) => {
            let mut s = String::new();
            let _ = write!(s, "{}s", d.num_milliseconds() as f64 / 1000.0);
            J::String(s)
        }
        other => return Err(format!("unable to convert {} to JSON", other.type_of())),
    })
}

/// A [`Document`] or anything else as it is.
fn unwrapped(v: Value) -> Value {
    match &v {
        Value::Opaque(o) => match o.downcast_ref::<Document>() {
            Some(d) => d.to_value(),
            None => v,
        },
        _ => v,
    }
}

/// Evaluates an ApplyConfiguration expression: the apply configuration as JSON (the object's
/// fields, without apiVersion and kind), or the error as the patcher words it; and the cost.
pub fn evaluate_apply_configuration(
    program: &Program,
    inputs: &Inputs<'_>,
    variables: Option<&Variables>,
) -> (Result<serde_json::Value, String>, u64) {
    let (value, cost) = run(program, inputs, variables);
    let result = value.and_then(|v| match &v {
        Value::Opaque(o) if o.downcast_ref::<StructValue>().is_some() => {
            let s = o.downcast_ref::<StructValue>().expect("checked");
            check_names(s)?;
            to_json(&s.fields)
        }
        other => Err(format!(
            "unsupported return type from ApplyConfiguration expression: {}",
            match other {
                Value::Opaque(o) => o.runtime_type_name().to_string(),
                _ => other.type_of().to_string(),
            }
        )),
    });
    (result, cost)
}

/// Evaluates a JSONPatch expression: the operations as JSON objects (`op`, `path`, `from` when
/// set, `value` when set), or the error as the patcher words it; and the cost.
pub fn evaluate_json_patch(
    program: &Program,
    inputs: &Inputs<'_>,
    variables: Option<&Variables>,
) -> (Result<Vec<serde_json::Value>, String>, u64) {
    let (value, cost) = run(program, inputs, variables);
    let result = value.and_then(|v| {
        let Value::List(items) = unwrapped(v) else {
            return Err(
                "type mismatch: JSONPatchType.expression should evaluate to array".to_string(),
            );
        };
        items
            .iter()
            .map(|item| {
                let op = match item {
                    Value::Opaque(o) => o
                        .downcast_ref::<StructValue>()
                        .filter(|s| &*s.type_name == JSON_PATCH),
                    _ => None,
                };
                let Some(op) = op else {
                    return Err(format!(
                        "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch: unsupported type conversion from {} to *mutation.JSONPatchVal",
                        match item {
                            Value::Opaque(o) => o.runtime_type_name().to_string(),
                            other => other.type_of().to_string(),
                        }
                    ));
                };
                let text = |name: &str| match op.field(name) {
                    Some(Value::String(s)) => s.to_string(),
                    _ => String::new(),
                };
                let mut out = serde_json::Map::new();
                out.insert("op".into(), text("op").into());
                out.insert("path".into(), text("path").into());
                let from = text("from");
                if !from.is_empty() {
                    out.insert("from".into(), from.into());
                }
                if let Some(value) = op.field("value") {
                    if let Value::Opaque(o) = value
                        && let Some(s) = o.downcast_ref::<StructValue>()
                    {
                        check_names(s)?;
                    }
                    let json = to_json(value).map_err(|e| {
                        format!(
                            "JSONPath valueExpression evaluated to a type that could not marshal to JSON: {e}"
                        )
                    })?;
                    out.insert("value".into(), json);
                }
                Ok(serde_json::Value::Object(out))
            })
            .collect()
    });
    (result, cost)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{Activation, Authorizer, Env, Inputs, ReturnType, compile_in};
    use super::*;

    fn env() -> Env {
        Env::policy(false).with_patch_types()
    }

    fn inputs_for<'a>(
        object: &'a serde_json::Value,
        request: &'a serde_json::Value,
        user: &'a crate::api::UserInfo,
        authorizer: &'a Authorizer,
    ) -> Inputs<'a> {
        Inputs::new(
            Activation::created(object, request, authorizer, user),
            None,
            None,
        )
    }

    fn apply(expression: &str, object: serde_json::Value) -> Result<serde_json::Value, String> {
        let program =
            compile_in(expression, &env(), ReturnType::ApplyConfiguration).map_err(|e| e.0)?;
        let (user, authorizer, request) = Default::default();
        let request: serde_json::Value = request;
        let inputs = inputs_for(&object, &request, &user, &authorizer);
        evaluate_apply_configuration(&program, &inputs, None).0
    }

    fn json_patch(
        expression: &str,
        object: serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let program = compile_in(expression, &env(), ReturnType::JsonPatches).map_err(|e| e.0)?;
        let (user, authorizer, request) = Default::default();
        let request: serde_json::Value = request;
        let inputs = inputs_for(&object, &request, &user, &authorizer);
        evaluate_json_patch(&program, &inputs, None)
            .0
            .map(serde_json::Value::Array)
    }

    #[test]
    fn object_literals_become_apply_configurations() {
        let deployment = json!({"spec": {"replicas": 1}});
        assert_eq!(
            apply(
                "Object{spec: Object.spec{replicas: object.spec.replicas % 2 == 0 ? object.spec.replicas + 1 : object.spec.replicas + 2}}",
                deployment
            ),
            Ok(json!({"spec": {"replicas": 3}}))
        );
        assert_eq!(
            apply(
                r#"Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: [Object.spec.template.spec.containers{name: "nginx", image: "nginx:1.14.2", ports: [Object.spec.template.spec.containers.ports{containerPort: 80}]}]}}}}"#,
                json!({})
            ),
            Ok(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "nginx", "image": "nginx:1.14.2", "ports": [{"containerPort": 80}]}
            ]}}}}))
        );
        // Maps, values read from the object and lists of plain values pass through.
        assert_eq!(
            apply(
                r#"Object{metadata: Object.metadata{labels: {"owner": "platform"}, annotations: object.metadata.annotations}}"#,
                json!({"metadata": {"annotations": {"a": "b"}}})
            ),
            Ok(json!({"metadata": {"labels": {"owner": "platform"}, "annotations": {"a": "b"}}}))
        );
    }

    #[test]
    fn type_names_must_follow_the_field_path() {
        // Upstream's smd_test.go: "apply configuration with invalid type name".
        assert_eq!(
            apply(
                "Object{spec: Object.specx{replicas: 1}}",
                json!({})
            ),
            Err(r#"type mismatch: unexpected type name "Object.specx", expected "Object.spec", which matches field name path from root Object type"#.into())
        );
    }

    #[test]
    fn return_types_are_checked_when_compiled() {
        // Upstream's smd_test.go: invalid return type and invalid initializer return type.
        assert_eq!(
            apply(r#""I'm a teapot!""#, json!({})),
            Err("must evaluate to Object but got string".into())
        );
        assert_eq!(
            apply("Object.spec.metadata{}", json!({})),
            Err("must evaluate to Object but got Object.spec.metadata".into())
        );
        assert_eq!(
            json_patch(r#"JSONPatch{op: "add", path: "/x"}"#, json!({})),
            Err("must evaluate to list(JSONPatch) but got JSONPatch".into())
        );
        // Outside a mutation's environment the types are not declared.
        let err = compile_in("Object{}", &Env::policy(false), ReturnType::Any)
            .err()
            .unwrap();
        assert!(
            err.0.contains("undeclared reference to 'Object'"),
            "{err:?}"
        );
    }

    #[test]
    fn json_patch_literals_become_operations() {
        assert_eq!(
            json_patch(
                r#"[JSONPatch{op: "add", path: "/metadata/annotations", value: {"policies.test/touched": "true"}}, JSONPatch{op: "move", from: "/a", path: "/b"}, JSONPatch{op: "remove", path: "/metadata/labels/" + jsonpatch.escapeKey("k8s.io/x~y")}]"#,
                json!({})
            ),
            Ok(json!([
                {"op": "add", "path": "/metadata/annotations", "value": {"policies.test/touched": "true"}},
                {"op": "move", "path": "/b", "from": "/a"},
                {"op": "remove", "path": "/metadata/labels/k8s.io~1x~0y"}
            ]))
        );
        // Upstream's JSONPatchType.Val: field types are checked at run time.
        let err = json_patch(r#"[JSONPatch{op: "add", path: dyn(1)}]"#, json!({})).unwrap_err();
        assert!(
            err.contains("unexpected type int64 for JSONPatchType 'path' field"),
            "{err}"
        );
        let err = compile_in(
            r#"[JSONPatch{op: "add", pth: "/x"}]"#,
            &env(),
            ReturnType::JsonPatches,
        )
        .err()
        .unwrap();
        assert!(err.0.contains("undefined field 'pth'"), "{err:?}");
    }
}

#[cfg(test)]
mod optional_fields {
    use serde_json::json;

    use super::super::{Activation, Authorizer, Env, Inputs, ReturnType, compile_in};
    use super::*;

    #[test]
    fn optional_fields_are_set_only_when_present() {
        let env = Env::policy(false).with_patch_types();
        let object = json!({"metadata": {"labels": {"a": "b"}}});
        let (user, authorizer): (crate::api::UserInfo, Authorizer) = Default::default();
        let request = json!({});
        let inputs = Inputs::new(
            Activation::created(&object, &request, &authorizer, &user),
            None,
            None,
        );
        let program = compile_in(
            "Object{metadata: Object.metadata{?labels: object.metadata.?labels, ?annotations: object.metadata.?annotations}}",
            &env,
            ReturnType::ApplyConfiguration,
        )
        .unwrap();
        assert_eq!(
            evaluate_apply_configuration(&program, &inputs, None).0,
            Ok(json!({"metadata": {"labels": {"a": "b"}}}))
        );
    }
}

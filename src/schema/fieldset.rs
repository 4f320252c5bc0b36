//! The `managedFields` entry kube-apiserver's field manager adds to an object it creates, before
//! admission: the fields the object sets, as structured-merge-diff compares the new object with
//! the zero object of its type, in the `FieldsV1` form.

use serde_json::{Map, Value};

use super::{Field, ListType, Schema, Type, TypeId};

/// The fields of `metadata` the field manager never records as owned.
pub const SYSTEM_METADATA: [&str; 9] = [
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
];

/// The fields of `object` (of the struct type `id`, as [`super::codec::normalize`] gives it)
/// that the zero object of its type does not have, as a `FieldsV1` value; None when there are
/// none. What the field manager strips is left out: `apiVersion`, `kind`, the system fields of
/// `metadata`, and `status` when `reset_status` (the resources whose strategy resets it).
pub fn fields_v1(schema: &Schema, id: TypeId, object: &Value, reset_status: bool) -> Option<Value> {
    let zero = super::codec::normalize(schema, id, &Value::Null).ok()?.0;
    let mut node = compare_struct(schema, id, false, Some(&zero), object)?;
    let Value::Object(top) = &mut node.children else {
        return None;
    };
    top.remove("f:apiVersion");
    top.remove("f:kind");
    if reset_status {
        top.remove("f:status");
    }
    if let Some(Value::Object(meta)) = top.get_mut("f:metadata") {
        for system in SYSTEM_METADATA {
            meta.remove(&format!("f:{system}"));
        }
        if meta.is_empty() {
            top.remove("f:metadata");
        }
    }
    (!top.is_empty()).then_some(node.children)
}

/// A node of the set: whether its path is a member itself, and its children.
struct Node {
    member: bool,
    children: Value,
}

impl Node {
    fn leaf() -> Node {
        Node {
            member: true,
            children: Value::Object(Map::new()),
        }
    }

    /// The node as `FieldsV1` writes it: `.` for a member that has children.
    fn into_json(self) -> Value {
        match self.children {
            Value::Object(mut m) if self.member && !m.is_empty() => {
                m.insert(".".into(), Value::Object(Map::new()));
                Value::Object(m)
            }
            other => other,
        }
    }
}

fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

/// Compares the value of a field of type `ty` in the zero object (`lhs`) and the new one.
fn compare(
    schema: &Schema,
    field: Option<&Field>,
    ty: &Type,
    lhs: Option<&Value>,
    rhs: &Value,
) -> Option<Node> {
    let atomic = field.is_some_and(|f| f.map_type.as_deref() == Some("atomic"));
    match ty {
        Type::Ptr(inner) => compare(schema, field, inner, lhs, rhs),
        Type::Struct(id) => compare_struct(schema, *id, atomic, lhs, rhs),
        Type::Map(inner) if !atomic => {
            let rhs = rhs.as_object()?;
            let lhs = present(lhs).and_then(Value::as_object);
            let mut children = Map::new();
            for (k, v) in rhs {
                if v.is_null() {
                    continue;
                }
                let before = lhs.and_then(|m| m.get(k));
                if let Some(n) = compare(schema, None, inner, before, v) {
                    children.insert(format!("f:{k}"), n.into_json());
                }
            }
            added_or_children(lhs.is_none(), rhs.is_empty(), children)
        }
        Type::List(inner) => match field.and_then(|f| f.list_type) {
            Some(ListType::Map) => {
                let keys = field.map_or(&[][..], |f| &f.list_map_keys);
                let items = rhs.as_array()?;
                let before = present(lhs).and_then(Value::as_array);
                let mut children = Map::new();
                for item in items {
                    let key = item_key(item, keys);
                    let old = before.and_then(|b| b.iter().find(|o| item_key(o, keys) == key));
                    let mut node =
                        compare(schema, None, inner, old, item).unwrap_or_else(Node::leaf);
                    node.member = true;
                    children.insert(format!("k:{key}"), node.into_json());
                }
                (!children.is_empty()).then_some(Node {
                    member: false,
                    children: Value::Object(children),
                })
            }
            Some(ListType::Set) => {
                let items = rhs.as_array()?;
                let mut children = Map::new();
                for item in items {
                    children.insert(format!("v:{}", compact(item)), Value::Object(Map::new()));
                }
                (!children.is_empty()).then_some(Node {
                    member: false,
                    children: Value::Object(children),
                })
            }
            _ => scalar(lhs, rhs),
        },
        _ => scalar(lhs, rhs),
    }
}

fn compare_struct(
    schema: &Schema,
    id: TypeId,
    atomic: bool,
    lhs: Option<&Value>,
    rhs: &Value,
) -> Option<Node> {
    let st = schema.get(id);
    if atomic || st.atomic {
        return scalar(lhs, rhs);
    }
    let rhs = rhs.as_object()?;
    let lhs = present(lhs).and_then(Value::as_object);
    let mut children = Map::new();
    for field in st.fields.iter() {
        let Some(v) = present(rhs.get(&*field.name)) else {
            continue;
        };
        let before = lhs.and_then(|m| m.get(&*field.name));
        if let Some(n) = compare(schema, Some(field), &field.ty, before, v) {
            children.insert(format!("f:{}", field.name), n.into_json());
        }
    }
    added_or_children(lhs.is_none(), rhs.is_empty(), children)
}

/// A map the zero object lacks is a member itself (a leaf when empty); one it has is only the
/// parent of what changed below it.
fn added_or_children(added: bool, empty: bool, children: Map<String, Value>) -> Option<Node> {
    if added && empty {
        return Some(Node::leaf());
    }
    if !added && children.is_empty() {
        return None;
    }
    Some(Node {
        member: added,
        children: Value::Object(children),
    })
}

fn scalar(lhs: Option<&Value>, rhs: &Value) -> Option<Node> {
    (present(lhs) != Some(rhs)).then(Node::leaf)
}

/// An associative list item's key, as `FieldsV1` writes it: its key fields as a JSON object,
/// members sorted by name.
fn item_key(item: &Value, keys: &[Box<str>]) -> String {
    let mut key = Map::new();
    for k in keys {
        if let Some(v) = present(item.get(&**k)) {
            key.insert(k.to_string(), v.clone());
        }
    }
    compact(&Value::Object(key))
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

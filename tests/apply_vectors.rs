//! structured-merge-diff's own merge test cases (`merge/*_test.go`), as data, run through
//! `hookscope::apply`'s updater over their schemas (structured-merge-diff's YAML schema
//! language, read by the small adapter below). See tests/fixtures/apply/README.md.

use std::collections::HashMap;

use hookscope::apply::typed::{Atom, ListRelationship, TypeModel};
use hookscope::apply::{Managers, PathElement, Set, Updater, UpdaterError};
use serde::Deserialize;
use serde_json::Value;

const VECTORS: &str = include_str!("fixtures/apply/vectors.json");

#[derive(Deserialize)]
struct Vectors {
    source: String,
    tag: String,
    schemas: HashMap<String, String>,
    cases: Vec<Case>,
    skipped: Vec<Skipped>,
}

#[derive(Deserialize)]
struct Skipped {
    file: String,
    test: String,
    name: Option<String>,
    reason: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Case {
    file: String,
    test: String,
    name: String,
    schema: String,
    root: String,
    ops: Vec<Op>,
    object: Option<String>,
    managed: Option<HashMap<String, ManagedSet>>,
    ignored: Option<HashMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Op {
    op: String,
    #[serde(default)]
    manager: String,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    object: String,
    conflicts: Option<Vec<ExpectedConflict>>,
    /// The schema a `change_schema` operation moves to.
    schema: Option<String>,
}

#[derive(Deserialize)]
struct ExpectedConflict {
    manager: String,
    path: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManagedSet {
    api_version: String,
    fields_v1: String,
}

// --- structured-merge-diff's schema language ---------------------------------------------------

#[derive(Debug)]
enum Node {
    Scalar,
    Deduced,
    List {
        element: Ty,
        keys: Vec<Box<str>>,
        atomic: bool,
    },
    Map {
        fields: Vec<(String, Ty, Option<Value>)>,
        element: Option<Ty>,
        atomic: bool,
    },
}

/// A type reference: a node, and the `elementRelationship` the reference overrides it with.
#[derive(Debug, Clone)]
struct Ty {
    node: usize,
    relationship: Option<String>,
}

struct SmdSchema {
    nodes: Vec<Node>,
    named: HashMap<String, usize>,
}

impl SmdSchema {
    fn parse(yaml: &str) -> Result<SmdSchema, String> {
        let doc: Value = serde_saphyr::from_str(yaml).map_err(|e| e.to_string())?;
        let types = doc["types"].as_array().cloned().unwrap_or_default();
        let mut s = SmdSchema {
            nodes: vec![Node::Scalar, Node::Deduced],
            named: HashMap::from([
                ("__untyped_atomic_".to_string(), 0),
                ("__untyped_deduced_".to_string(), 1),
            ]),
        };
        for t in &types {
            let name = t["name"].as_str().ok_or("type without a name")?;
            s.named.insert(name.into(), s.nodes.len());
            s.nodes.push(Node::Scalar);
        }
        for t in &types {
            let index = s.named[t["name"].as_str().unwrap_or_default()];
            s.nodes[index] = s.node(t)?;
        }
        Ok(s)
    }

    fn node(&mut self, t: &Value) -> Result<Node, String> {
        let kinds = ["scalar", "list", "map", "untyped"]
            .iter()
            .filter(|k| t.get(**k).is_some())
            .count();
        if kinds > 1 || t.get("untyped").is_some() {
            return Ok(Node::Deduced);
        }
        if let Some(l) = t.get("list") {
            return Ok(Node::List {
                element: self.type_ref(&l["elementType"])?,
                keys: l["keys"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(Into::into)
                    .collect(),
                atomic: l["elementRelationship"].as_str() != Some("associative"),
            });
        }
        if let Some(m) = t.get("map") {
            let mut fields = Vec::new();
            for f in m["fields"].as_array().into_iter().flatten() {
                fields.push((
                    f["name"].as_str().unwrap_or_default().to_string(),
                    self.type_ref(&f["type"])?,
                    f.get("default").cloned(),
                ));
            }
            let element = match m.get("elementType") {
                Some(e) => Some(self.type_ref(e)?),
                None => None,
            };
            return Ok(Node::Map {
                fields,
                element,
                atomic: m["elementRelationship"].as_str() == Some("atomic"),
            });
        }
        Ok(Node::Scalar)
    }

    fn type_ref(&mut self, r: &Value) -> Result<Ty, String> {
        let relationship = r["elementRelationship"].as_str().map(Into::into);
        if let Some(name) = r["namedType"].as_str() {
            let node = *self
                .named
                .get(name)
                .ok_or_else(|| format!("no type {name}"))?;
            return Ok(Ty { node, relationship });
        }
        let node = self.node(r)?;
        self.nodes.push(node);
        Ok(Ty {
            node: self.nodes.len() - 1,
            relationship,
        })
    }

    fn root(&self, name: &str) -> Option<Ty> {
        Some(Ty {
            node: *self.named.get(name)?,
            relationship: None,
        })
    }
}

impl TypeModel for SmdSchema {
    type Type = Ty;

    fn atom(&self, ty: &Ty) -> Atom<'_> {
        let over = ty.relationship.as_deref();
        match &self.nodes[ty.node] {
            Node::Scalar => Atom::Scalar,
            Node::Deduced => Atom::Deduced,
            Node::List { keys, atomic, .. } => {
                let atomic = match over {
                    Some("atomic") => true,
                    Some("associative") => false,
                    _ => *atomic,
                };
                Atom::List(if atomic {
                    ListRelationship::Atomic
                } else if keys.is_empty() {
                    ListRelationship::Set
                } else {
                    ListRelationship::Map(keys)
                })
            }
            Node::Map { atomic, .. } => Atom::Map {
                atomic: match over {
                    Some("atomic") => true,
                    Some("separable") | Some("granular") => false,
                    _ => *atomic,
                },
            },
        }
    }

    fn element(&self, ty: &Ty) -> Option<Ty> {
        match &self.nodes[ty.node] {
            Node::List { element, .. } => Some(element.clone()),
            _ => None,
        }
    }

    fn field(&self, ty: &Ty, name: &str) -> Option<(Ty, bool)> {
        match &self.nodes[ty.node] {
            Node::Map {
                fields, element, ..
            } => match fields.iter().find(|f| f.0 == name) {
                Some(f) => Some((f.1.clone(), true)),
                None => element.clone().map(|e| (e, false)),
            },
            _ => None,
        }
    }

    fn key_default(&self, item: &Ty, key: &str) -> Option<Value> {
        match &self.nodes[item.node] {
            Node::Map { fields, .. } => fields.iter().find(|f| f.0 == key)?.2.clone(),
            _ => None,
        }
    }
}

// --- the runner -------------------------------------------------------------------------------

fn yaml(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_saphyr::from_str(text).map_err(|e| format!("yaml: {e}"))
}

fn path_of(elements: &[String]) -> Result<Vec<PathElement>, String> {
    elements
        .iter()
        .map(|e| {
            PathElement::deserialize(e)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("path element {e}"))
        })
        .collect()
}

fn run(case: &Case, schemas: &HashMap<String, SmdSchema>) -> Result<(), String> {
    let schema_named = |name: &str| schemas.get(name).ok_or_else(|| format!("no schema {name}"));
    let mut schema = schema_named(&case.schema)?;
    let root_of = |schema: &SmdSchema, version: &str| {
        let name = if case.root == "$apiVersion" {
            version
        } else {
            &case.root
        };
        schema.root(name).ok_or_else(|| format!("no type {name}"))
    };
    let mut live = Value::Null;
    let mut managers = Managers::new();
    for (i, op) in case.ops.iter().enumerate() {
        if let Some(next) = op.schema.as_deref().filter(|_| op.op == "change_schema") {
            // The live object is kept and read with the new schema from then on.
            schema = schema_named(next)?;
            continue;
        }
        let ignored = match case.ignored.as_ref().and_then(|m| m.get(&op.api_version)) {
            Some(text) => Some(Set::from_fields_v1_str(text).map_err(|e| e.to_string())?),
            None => None,
        };
        let updater = Updater {
            model: schema,
            ty: root_of(schema, &op.api_version)?,
            ignored,
            noop_by_comparison: false,
        };
        let object = yaml(&op.object)?;
        let fail = |e: String| format!("failed operation {i}: {e}");
        match op.op.as_str() {
            "apply" | "force_apply" => {
                let force = op.op == "force_apply";
                let result = updater.apply(
                    &live,
                    &object,
                    &op.api_version,
                    &mut managers,
                    &op.manager,
                    force,
                );
                let got = match result {
                    Ok(new) => {
                        if let Some(new) = new {
                            live = new;
                        }
                        Vec::new()
                    }
                    Err(UpdaterError::Conflicts(c)) if op.conflicts.is_some() => c.0,
                    Err(e) => return Err(fail(e.to_string())),
                };
                if let Some(expected) = &op.conflicts {
                    let mut want = Vec::new();
                    for c in expected {
                        want.push((c.manager.clone(), path_of(&c.path).map_err(fail)?));
                    }
                    let mut have: Vec<_> = got.into_iter().map(|c| (c.manager, c.path.0)).collect();
                    want.sort();
                    have.sort();
                    if want != have {
                        return Err(fail(format!("expected conflicts {want:?}, got {have:?}")));
                    }
                }
            }
            "update" => {
                updater
                    .update(&live, &object, &op.api_version, &mut managers, &op.manager)
                    .map_err(|e| fail(e.to_string()))?;
                live = object;
            }
            other => return Err(format!("operation {other}")),
        }
    }
    if let Some(expected) = case.object.as_deref().filter(|o| !o.is_empty()) {
        let want = yaml(expected)?;
        if want != live {
            return Err(format!("expected live object\n{want}\ngot\n{live}"));
        }
    }
    if let Some(expected) = &case.managed {
        let mut diff = Vec::new();
        for (manager, want) in expected {
            let set = Set::from_fields_v1_str(&want.fields_v1).map_err(|e| e.to_string())?;
            match managers.get(manager) {
                Some(vs) if vs.api_version == want.api_version && vs.set == set => {}
                Some(vs) => diff.push(format!(
                    "{manager}: expected {} at {}, got {} at {}",
                    set.to_fields_v1_string(),
                    want.api_version,
                    vs.set.to_fields_v1_string(),
                    vs.api_version
                )),
                None => diff.push(format!("{manager}: missing")),
            }
        }
        for (manager, vs) in &managers {
            if !expected.contains_key(manager) {
                diff.push(format!(
                    "{manager}: unexpected {}",
                    vs.set.to_fields_v1_string()
                ));
            }
        }
        if !diff.is_empty() {
            return Err(format!("managed fields differ:\n{}", diff.join("\n")));
        }
    }
    if let Some((manager, _)) = managers.iter().find(|(_, vs)| vs.set.is_empty()) {
        return Err(format!("empty set for {manager}"));
    }
    Ok(())
}

#[test]
fn structured_merge_diff_merge_vectors() {
    let v: Vectors = serde_json::from_str(VECTORS).expect("vectors.json");
    let mut schemas = HashMap::new();
    for (name, text) in &v.schemas {
        schemas.insert(
            name.clone(),
            SmdSchema::parse(text).unwrap_or_else(|e| panic!("schema {name}: {e}")),
        );
    }
    let mut failures = Vec::new();
    for case in &v.cases {
        if let Err(e) = run(case, &schemas) {
            failures.push(format!("{} {} {}: {e}", case.file, case.test, case.name));
        }
    }
    println!(
        "{} {}: {} cases run, {} passed; {} skipped:",
        v.source,
        v.tag,
        v.cases.len(),
        v.cases.len() - failures.len(),
        v.skipped.len()
    );
    for s in &v.skipped {
        println!(
            "  skipped {} {} {}: {}",
            s.file,
            s.test,
            s.name.as_deref().unwrap_or("(all cases)"),
            s.reason
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        v.cases.len(),
        failures.join("\n\n")
    );
}

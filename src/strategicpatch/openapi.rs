//! [`LookupPatchMeta`] over an OpenAPI document given as JSON: Swagger 2.0 (`definitions`,
//! `#/definitions/…` references) or OpenAPI 3 (`components.schemas`, `#/components/schemas/…`,
//! a reference wrapped in `allOf`), with the patch metadata in `x-kubernetes-patch-strategy` and
//! `x-kubernetes-patch-merge-key` on the properties.
//!
//! Lookups answer as upstream's struct-tag lookup does for the Go type the schema describes (the
//! lookup kube-apiserver uses), with one reading of what the schema leaves open:
//!
//! - a schema with `properties`, or `type: object` without `additionalProperties`, is a struct
//!   (named after its definition's last dotted segment, `PodSpec`); a missing field is
//!   [`LookupPatchMetaError::FieldNotFound`];
//! - `additionalProperties` makes a map, `type: array` a list, the other types scalars; looking up
//!   a field in them is [`LookupPatchMetaError::NotAStruct`];
//! - a list lookup on a field holding a struct answers with that struct (Go's pointer-to-struct
//!   case); on a map or a scalar it is [`LookupPatchMetaError::NotASlice`];
//! - a schema with no type, properties, items, additional properties or reference is free-form
//!   JSON: every lookup in it succeeds with no patch metadata, as upstream's OpenAPI lookup does.

use serde_json::{Map, Value};

use super::govalue::{go_type, type_name};
use super::{LookupPatchMeta, LookupPatchMetaError, PatchMeta};

const PATCH_STRATEGY_EXTENSION: &str = "x-kubernetes-patch-strategy";
const PATCH_MERGE_KEY_EXTENSION: &str = "x-kubernetes-patch-merge-key";
const MAX_REFERENCE_DEPTH: usize = 64;

/// An OpenAPI document holding the schemas of the objects to patch.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenApiSchema {
    doc: Value,
}

/// One schema of an [`OpenApiSchema`], the [`LookupPatchMeta`] handle.
#[derive(Debug, Clone, Copy)]
pub struct OpenApiNode<'a> {
    doc: &'a Value,
    /// `None`: free-form JSON.
    schema: Option<&'a Value>,
    /// The Go type name used in errors.
    type_name: &'a str,
}

impl OpenApiSchema {
    /// Wraps a parsed OpenAPI document.
    pub fn new(doc: Value) -> Self {
        OpenApiSchema { doc }
    }

    /// The schema named `name` in `definitions` or `components.schemas` (`mergeItem`,
    /// `io.k8s.api.core.v1.Pod`), to apply patches to objects of that type with.
    pub fn definition(&self, name: &str) -> Option<OpenApiNode<'_>> {
        let (name, schema) = find_definition(&self.doc, name)?;
        resolve(&self.doc, schema, short_name(name)).ok()
    }
}

/// The definition `name`, with its name as the document spells it.
fn find_definition<'a>(doc: &'a Value, name: &str) -> Option<(&'a str, &'a Value)> {
    doc.get("definitions")
        .and_then(|d| d.as_object()?.get_key_value(name))
        .or_else(|| {
            doc.get("components")?
                .get("schemas")?
                .as_object()?
                .get_key_value(name)
        })
        .map(|(k, v)| (k.as_str(), v))
}

fn short_name(definition: &str) -> &str {
    definition.rsplit('.').next().unwrap_or(definition)
}

/// Follows `allOf[0]` and `$ref` to the schema that describes the value.
fn resolve<'a>(
    doc: &'a Value,
    mut schema: &'a Value,
    mut name: &'a str,
) -> Result<OpenApiNode<'a>, LookupPatchMetaError> {
    for _ in 0..MAX_REFERENCE_DEPTH {
        if let Some(first) = schema
            .get("allOf")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
        {
            schema = first;
            continue;
        }
        let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
            return Ok(OpenApiNode {
                doc,
                schema: (!is_free_form(schema)).then_some(schema),
                type_name: name,
            });
        };
        let target = reference
            .strip_prefix("#/definitions/")
            .or_else(|| reference.strip_prefix("#/components/schemas/"));
        let Some((target, found)) = target.and_then(|t| find_definition(doc, t)) else {
            return Err(LookupPatchMetaError::Other(format!(
                "unable to resolve {reference}"
            )));
        };
        schema = found;
        name = short_name(target);
    }
    Err(LookupPatchMetaError::Other(
        "too many nested schema references".to_string(),
    ))
}

fn is_free_form(schema: &Value) -> bool {
    [
        "type",
        "properties",
        "items",
        "additionalProperties",
        "$ref",
    ]
    .iter()
    .all(|k| schema.get(k).is_none())
}

enum Kind<'a> {
    FreeForm,
    Struct(Option<&'a Map<String, Value>>),
    Map,
    Slice(Option<&'a Value>),
    Scalar(&'static str),
}

impl<'a> OpenApiNode<'a> {
    fn kind(&self) -> Kind<'a> {
        let Some(s) = self.schema else {
            return Kind::FreeForm;
        };
        if let Some(props) = s.get("properties").and_then(Value::as_object) {
            return Kind::Struct(Some(props));
        }
        let format = s.get("format").and_then(Value::as_str).unwrap_or("");
        match s.get("type").and_then(Value::as_str) {
            Some("object") if s.get("additionalProperties").is_none() => Kind::Struct(None),
            Some("object") => Kind::Map,
            Some("array") => Kind::Slice(s.get("items")),
            Some("string") if format == "byte" => Kind::Scalar("slice"),
            Some("string") => Kind::Scalar("string"),
            Some("integer") => Kind::Scalar(match format {
                "int32" => "int32",
                "int64" => "int64",
                _ => "int",
            }),
            Some("number") => Kind::Scalar(if format == "float" || format == "float32" {
                "float32"
            } else {
                "float64"
            }),
            Some("boolean") => Kind::Scalar("bool"),
            _ if s.get("additionalProperties").is_some() => Kind::Map,
            _ if s.get("items").is_some() => Kind::Slice(s.get("items")),
            _ => Kind::FreeForm,
        }
    }

    fn free_form(&self) -> OpenApiNode<'a> {
        OpenApiNode {
            doc: self.doc,
            schema: None,
            type_name: "",
        }
    }

    /// The property `key` of this struct, with its patch metadata.
    fn field(&self, key: &str) -> Result<(&'a Value, PatchMeta<'a>), LookupPatchMetaError> {
        let props = match self.kind() {
            Kind::Struct(props) => props,
            _ => {
                return Err(LookupPatchMetaError::NotAStruct {
                    kind: self.kind_name().to_string(),
                });
            }
        };
        let property = props.and_then(|p| {
            p.get(key).or_else(|| {
                p.iter()
                    .find(|(name, _)| fold_equal(name, key))
                    .map(|(_, v)| v)
            })
        });
        let Some(property) = property else {
            return Err(LookupPatchMetaError::FieldNotFound {
                struct_name: self.type_name.to_string(),
                field: key.to_string(),
            });
        };
        let meta = PatchMeta {
            patch_strategies: extension(property, PATCH_STRATEGY_EXTENSION)?,
            patch_merge_key: extension(property, PATCH_MERGE_KEY_EXTENSION)?,
        };
        Ok((property, meta))
    }

    /// The field `key` and its patch metadata (free-form JSON has free-form fields).
    fn lookup_field(
        &self,
        key: &str,
    ) -> Result<(OpenApiNode<'a>, PatchMeta<'a>), LookupPatchMetaError> {
        if let Kind::FreeForm = self.kind() {
            return Ok((self.free_form(), PatchMeta::default()));
        }
        let (property, meta) = self.field(key)?;
        Ok((resolve(self.doc, property, "")?, meta))
    }

    fn kind_name(&self) -> &'static str {
        match self.kind() {
            Kind::FreeForm => "interface",
            Kind::Struct(_) => "struct",
            Kind::Map => "map",
            Kind::Slice(_) => "slice",
            Kind::Scalar(k) => k,
        }
    }
}

/// Case-insensitive equality of JSON names, as Go's `encoding/json` matches struct fields.
fn fold_equal(a: &str, b: &str) -> bool {
    a.chars()
        .flat_map(char::to_lowercase)
        .eq(b.chars().flat_map(char::to_lowercase))
}

fn extension<'a>(property: &'a Value, name: &str) -> Result<&'a str, LookupPatchMetaError> {
    match property.get(name) {
        None => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(LookupPatchMetaError::Other(format!(
            "expected a string, but received a {}",
            type_name(go_type(other))
        ))),
    }
}

impl LookupPatchMeta for OpenApiNode<'_> {
    fn lookup_patch_metadata_for_struct(
        &self,
        key: &str,
    ) -> Result<(Self, PatchMeta<'_>), LookupPatchMetaError> {
        self.lookup_field(key)
    }

    fn lookup_patch_metadata_for_slice(
        &self,
        key: &str,
    ) -> Result<(Self, PatchMeta<'_>), LookupPatchMetaError> {
        let (field, meta) = self.lookup_field(key)?;
        let element = match field.kind() {
            Kind::Slice(None) | Kind::FreeForm => field.free_form(),
            Kind::Slice(Some(items)) => {
                let element = resolve(self.doc, items, "")?;
                if let Kind::Slice(_) = element.kind() {
                    return Err(LookupPatchMetaError::SliceOfSlices);
                }
                element
            }
            Kind::Struct(_) => field,
            Kind::Map | Kind::Scalar(_) => {
                return Err(LookupPatchMetaError::NotASlice {
                    kind: "struct".to_string(),
                });
            }
        };
        Ok((element, meta))
    }

    fn name(&self) -> &str {
        self.kind_name()
    }
}

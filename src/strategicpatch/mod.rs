//! Strategic merge patch, applied as kube-apiserver applies it to built-in objects
//! (`StrategicMergeMapPatch` in `k8s.io/apimachinery/pkg/util/strategicpatch`, unchanged in
//! behaviour from Kubernetes 1.28 to 1.36).
//!
//! The patch is merged into the original object key by key: `null` deletes, maps merge, scalars
//! replace, and lists replace unless the field's schema declares the `merge` patch strategy — then
//! lists of scalars are unioned and lists of maps merged by the declared merge key. Directives
//! steer it: `$patch: replace | delete` (on a map or as a list element), `$retainKeys`,
//! `$setElementOrder/<field>` and `$deleteFromPrimitiveList/<field>`. Merged lists are ordered as
//! upstream orders them (the patch's items in the patch's or `$setElementOrder`'s order, the
//! others in the original's, interleaved), errors carry upstream's texts, and where upstream's Go
//! code panics the apply fails with [`Error::Panic`].
//!
//! The schema comes through [`LookupPatchMeta`], upstream's `LookupPatchMeta` interface;
//! [`OpenApiSchema`] implements it over an OpenAPI document given as JSON.
//!
//! ```
//! use hookscope::strategicpatch::{OpenApiSchema, strategic_merge_patch};
//! use serde_json::json;
//!
//! let schema = OpenApiSchema::new(json!({"definitions": {"Pod": {"properties": {
//!     "containers": {"type": "array", "items": {"$ref": "#/definitions/Container"},
//!         "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "name"}}},
//!     "Container": {"properties": {"name": {"type": "string"}, "image": {"type": "string"}}}}}));
//! let pod = schema.definition("Pod").unwrap();
//!
//! let original = json!({"containers": [{"name": "app", "image": "app:1"}, {"name": "proxy", "image": "proxy:1"}]});
//! let patch = json!({"containers": [{"name": "proxy", "image": "proxy:2"}]});
//! let patched = strategic_merge_patch(original, patch, &pod).unwrap();
//! assert_eq!(patched, json!({"containers": [{"name": "app", "image": "app:1"}, {"name": "proxy", "image": "proxy:2"}]}));
//! ```

mod errors;
mod govalue;
mod merge;
mod meta;
mod openapi;
mod sort;

pub use errors::{Error, LookupPatchMetaError};
pub use meta::{LookupPatchMeta, PatchMeta};
pub use openapi::{OpenApiNode, OpenApiSchema};

use serde_json::{Map, Value};

/// `mergepatch.ErrUnsupportedStrategicMergePatchFormat`'s text: what `StrategicMergeMapPatch`
/// answers (400 Bad Request in the patch handler) when the object is `Unstructured`, i.e. has no
/// Go type to read patch metadata from.
///
/// For custom resources kube-apiserver does not get that far: the custom-resource handler does not
/// list `application/strategic-merge-patch+json` among its patch types, so the request is refused
/// before the patch is read, with [`custom_resource_refusal`].
pub const UNSUPPORTED_FORMAT_MESSAGE: &str = "strategic merge patch format is not supported";

/// The HTTP status of [`custom_resource_refusal`]: 415 Unsupported Media Type.
pub const CUSTOM_RESOURCE_REFUSAL_CODE: u16 = 415;

/// What kube-apiserver answers a strategic merge patch of a custom resource with: a `Status` with
/// code 415, reason `UnsupportedMediaType` and this message (`NewUnsupportedMediaTypeError` over
/// the custom-resource handler's patch types; `application/apply-patch+cbor` is listed when the
/// `CBORServingAndStorage` feature gate is on, off by default).
pub fn custom_resource_refusal(cbor_serving_and_storage: bool) -> String {
    let mut accepted = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ];
    if cbor_serving_and_storage {
        accepted.push("application/apply-patch+cbor");
    }
    format!(
        "the body of the request was in an unknown format - accepted media types include: {}",
        accepted.join(", ")
    )
}

/// The plain-text body of kube-apiserver's 500 answer when a handler panics (see
/// [`Error::Panic`]).
pub const APISERVER_PANIC_MESSAGE: &str =
    "This request caused apiserver to panic. Look in the logs for details.";

/// Applies `patch` to `original` (`StrategicMergeMapPatchUsingLookupPatchMeta`). Both must be
/// JSON objects or `null` (an empty object); anything else is [`Error::BadJsonDoc`].
///
/// Numbers keep their JSON form; in comparisons (merge keys, list items) an integer that fits in
/// an `int64` and a number written with a fraction or exponent are different values, as they are
/// upstream after `UnmarshalCaseSensitivePreserveInts`.
pub fn strategic_merge_patch<S: LookupPatchMeta>(
    original: Value,
    patch: Value,
    schema: &S,
) -> Result<Value, Error> {
    let original = into_object(original)?;
    let patch = into_object(patch)?;
    strategic_merge_map_patch(original, patch, schema).map(Value::Object)
}

/// [`strategic_merge_patch`] on JSON texts, each of which must be a JSON object or `null`
/// (`StrategicMergePatchUsingLookupPatchMeta`; an unparsable text is [`Error::BadJsonDoc`]).
pub fn strategic_merge_patch_json<S: LookupPatchMeta>(
    original: &[u8],
    patch: &[u8],
    schema: &S,
) -> Result<Value, Error> {
    let parse = |text: &[u8]| crate::json::from_slice::<Value>(text).map_err(|_| Error::BadJsonDoc);
    strategic_merge_patch(parse(original)?, parse(patch)?, schema)
}

/// [`strategic_merge_patch`] on objects.
pub fn strategic_merge_map_patch<S: LookupPatchMeta>(
    original: Map<String, Value>,
    patch: Map<String, Value>,
    schema: &S,
) -> Result<Map<String, Value>, Error> {
    merge::merge_map(original, patch, schema)
}

fn into_object(v: Value) -> Result<Map<String, Value>, Error> {
    match v {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        _ => Err(Error::BadJsonDoc),
    }
}

#[cfg(test)]
mod tests;

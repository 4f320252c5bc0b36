//! The errors of applying a strategic merge patch, each with upstream's text.

use crate::gofmt::quote;

/// Why a strategic merge patch could not be applied. The `Display` text is upstream's error text
/// (`mergepatch` package errors and `strategicpatch`'s own `fmt.Errorf`s), which kube-apiserver
/// returns as the `Status` message; [`Error::status_code`] gives the HTTP code it answers with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `mergepatch.ErrBadJSONDoc`: the original or the patch is not a JSON object.
    #[error("invalid JSON document")]
    BadJsonDoc,
    /// `mergepatch.ErrNoListOfLists`.
    #[error("lists of lists are not supported")]
    NoListOfLists,
    /// `mergepatch.ErrBadPatchFormatForPrimitiveList`: a `$deleteFromPrimitiveList` key without
    /// `/<field>`.
    #[error("invalid patch format of primitive list")]
    BadPatchFormatForPrimitiveList,
    /// `mergepatch.ErrBadPatchFormatForRetainKeys`: `$retainKeys` is not a list, or the patch sets
    /// a field the list does not name.
    #[error("invalid patch format of retainKeys")]
    BadPatchFormatForRetainKeys,
    /// `mergepatch.ErrBadPatchFormatForSetElementOrderList`: a `$setElementOrder` key without
    /// `/<field>`.
    #[error("invalid patch format of setElementOrder list")]
    BadPatchFormatForSetElementOrderList,
    /// `mergepatch.ErrUnsupportedStrategicMergePatchFormat`: upstream's answer when the schema is
    /// `Unstructured` (see [`super::UNSUPPORTED_FORMAT_MESSAGE`]).
    #[error("strategic merge patch format is not supported")]
    UnsupportedFormat,
    /// `mergepatch.ErrNoMergeKey`: a map in a merged list lacks the merge key.
    #[error("map: {map} does not contain declared merge key: {merge_key}")]
    NoMergeKey {
        /// The map as Go's `%v` prints it (`map[name:1 value:a]`).
        map: String,
        /// The declared merge key.
        merge_key: String,
    },
    /// `mergepatch.ErrBadArgType`: a value of another type where a map or a list was expected.
    #[error("expected a {expected}, but received a {actual}")]
    BadArgType {
        /// The Go type expected (`map[string]interface {}`, `[]interface {}`).
        expected: &'static str,
        /// The Go type found (`string`, `int64`, …; `%!s(<nil>)` for null).
        actual: &'static str,
    },
    /// `mergepatch.ErrBadPatchType`: a `$patch` value other than `replace`, `delete` (or `merge`
    /// in a list).
    #[error("unknown patch type: {directive} in map: {map}")]
    BadPatchType {
        /// The directive's value as Go's `%s` prints it.
        directive: String,
        /// The map holding it, as `%v` prints it.
        map: String,
    },
    /// `$patch: merge` as a list element.
    #[error("merging lists cannot yet be specified in the patch")]
    MergeDirectiveInList,
    /// A list of maps merged without a declared merge key.
    #[error("cannot merge lists without merge key for {type_name}")]
    NoMergeKeyDeclared {
        /// [`super::LookupPatchMeta::name`] of the list's element schema.
        type_name: String,
    },
    /// Elements of different Go types in lists merged together.
    #[error("list element types are not identical: {lists}")]
    ElementTypesNotIdentical {
        /// The lists as `fmt.Sprint` prints them (`[[1 2] [a]]`).
        lists: String,
    },
    /// Ordering a list when neither side has an element.
    #[error("no elements in any of the given slices")]
    NoElements,
    /// A non-map element in a list searched by merge key.
    #[error("value for key {index} is not a map")]
    NotAMap {
        /// The element's index.
        index: usize,
    },
    /// The patch list's order contradicts its `$setElementOrder` list.
    #[error(
        "The order in patch list:\n{patch_list}\n doesn't match $setElementOrder list:\n{set_element_order}\n"
    )]
    SetElementOrderMismatch {
        /// The patch list as `%v` prints it.
        patch_list: String,
        /// The `$setElementOrder` list as `%v` prints it.
        set_element_order: String,
    },
    /// A field's patch strategy list has more than two entries, or two without `retainKeys`.
    #[error("unexpected patch strategy: {strategies}")]
    UnexpectedPatchStrategy {
        /// The strategies as `%v` prints a `[]string` (`[merge replace]`).
        strategies: String,
    },
    /// The schema lookup failed.
    #[error(transparent)]
    Lookup(#[from] LookupPatchMetaError),
    /// Where upstream's Go code panics (comparing or hashing maps and lists, a `null` first list
    /// element): the Go runtime message prefixed by `panic: `. kube-apiserver recovers the panic
    /// and answers 500 with [`super::APISERVER_PANIC_MESSAGE`] as plain text.
    #[error("panic: {message}")]
    Panic {
        /// The Go runtime error, e.g. `runtime error: hash of unhashable type []interface {}`.
        message: &'static str,
    },
}

impl Error {
    /// The HTTP status kube-apiserver answers a PATCH with when applying the patch fails this way
    /// (`interpretStrategicMergePatchError` in the apiserver's patch handler): 400 Bad Request for
    /// the malformed-document and malformed-directive errors, 422 for lists of lists, and 500 for
    /// everything else, which the handler passes on as it is (an `InternalError`-less `Status`
    /// with reason `Unknown` and this error's text) or which panicked.
    pub fn status_code(&self) -> u16 {
        match self {
            Error::BadJsonDoc
            | Error::BadPatchFormatForPrimitiveList
            | Error::BadPatchFormatForRetainKeys
            | Error::BadPatchFormatForSetElementOrderList
            | Error::UnsupportedFormat => 400,
            Error::NoListOfLists => 422,
            _ => 500,
        }
    }
}

/// A failed schema lookup ([`super::LookupPatchMeta`]). The variants carry the texts of
/// upstream's struct-tag lookup (`PatchMetaFromStruct`, which kube-apiserver uses for built-in
/// types); [`LookupPatchMetaError::Other`] carries any other implementation's own text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupPatchMetaError {
    /// The struct has no field with this JSON name.
    #[error("unable to find api field in struct {struct_name} for the json field {}", quote(.field))]
    FieldNotFound {
        /// The Go struct's name (`PodSpec`).
        struct_name: String,
        /// The JSON key looked up.
        field: String,
    },
    /// A key looked up in something that is not a struct (a map, a list, a scalar).
    #[error("merging an object in json but data type is not struct, instead is: {kind}")]
    NotAStruct {
        /// The Go kind (`map`, `slice`, `string`, `interface`, …).
        kind: String,
    },
    /// A list looked up on a field that is not a list (the kind printed is the parent's, as
    /// upstream prints it: `struct`).
    #[error("expected slice or array type, but got: {kind}")]
    NotASlice {
        /// The Go kind printed.
        kind: String,
    },
    /// A list of lists.
    #[error("unexpected slice of slice")]
    SliceOfSlices,
    /// Any other failure, with its text.
    #[error("{0}")]
    Other(String),
}

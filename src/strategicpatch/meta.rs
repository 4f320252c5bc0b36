//! The schema a strategic merge patch is applied with: upstream's `LookupPatchMeta`.

use super::LookupPatchMetaError;

/// A field's patch metadata: its `patchStrategy` and `patchMergeKey` struct tags, or its
/// `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key` OpenAPI extensions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PatchMeta<'a> {
    /// The patch strategies as written, comma-separated (`merge`, `retainKeys`,
    /// `merge,retainKeys`, `replace`); empty when the field declares none.
    pub patch_strategies: &'a str,
    /// The merge key of a list of maps (`name`, `containerPort`); empty when none is declared.
    pub patch_merge_key: &'a str,
}

/// The schema of one value inside the object being patched, as upstream's `LookupPatchMeta`
/// interface: asked about one of its fields, it answers with that field's patch metadata and the
/// schema of the field's value (for a list: of the list's elements).
///
/// A value of the implementing type stands for one node of the schema (a struct type, the element
/// type of a list, …) and should be a cheap handle; the root handle is the object's kind (`Pod`).
///
/// The patch asks only where it must: `lookup_patch_metadata_for_struct` when the original and
/// the patch both hold a map under `key`, `lookup_patch_metadata_for_slice` when both hold a list
/// (or for `$setElementOrder/<key>`).
///
/// kube-apiserver uses the Go struct tags of the built-in types (`PatchMetaFromStruct`); an
/// implementation that reproduces its answers — including its errors, see
/// [`LookupPatchMetaError`] — reproduces kube-apiserver.
pub trait LookupPatchMeta: Sized {
    /// The field `key` of this struct: its patch metadata and the schema of its value.
    ///
    /// Upstream: the field is found by its JSON name (exactly, else case-insensitively); a
    /// missing field is [`LookupPatchMetaError::FieldNotFound`]; a node that is not a struct
    /// (a map, a list, a scalar, free-form JSON) is [`LookupPatchMetaError::NotAStruct`].
    fn lookup_patch_metadata_for_struct(
        &self,
        key: &str,
    ) -> Result<(Self, PatchMeta<'_>), LookupPatchMetaError>;

    /// The list field `key` of this struct: its patch metadata and the schema of its
    /// **elements**.
    ///
    /// Upstream: a pointer to a struct counts as a list of that struct; a list of lists is
    /// [`LookupPatchMetaError::SliceOfSlices`]; any other non-list field is
    /// [`LookupPatchMetaError::NotASlice`] with kind `struct`.
    fn lookup_patch_metadata_for_slice(
        &self,
        key: &str,
    ) -> Result<(Self, PatchMeta<'_>), LookupPatchMetaError>;

    /// The node's type name, used only in the error for a list of maps without a merge key
    /// (upstream with struct tags: the Go kind of the element type, `struct`).
    fn name(&self) -> &str;
}

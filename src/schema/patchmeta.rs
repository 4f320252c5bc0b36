//! The Go types as kube-apiserver's strategic merge patch reads them: `PatchMetaFromStruct`,
//! the struct tags `patchStrategy` and `patchMergeKey` found through Go's reflection.

use super::{Schema, Type, TypeId};
use crate::strategicpatch::{LookupPatchMeta, LookupPatchMetaError, PatchMeta};

/// One node of a kind's Go type: the root struct, or the type of a field or of a list's
/// elements.
#[derive(Debug, Clone, Copy)]
pub struct PatchNode<'s> {
    schema: &'s Schema,
    node: Node<'s>,
}

#[derive(Debug, Clone, Copy)]
enum Node<'s> {
    Struct(TypeId),
    Type(&'s Type),
    /// A `uint8`, the element of a `[]byte`.
    Byte,
}

impl<'s> PatchNode<'s> {
    /// The root node of a struct type (a kind's).
    pub fn new(schema: &'s Schema, id: TypeId) -> Self {
        PatchNode {
            schema,
            node: Node::Struct(id),
        }
    }

    fn at(&self, ty: &'s Type) -> Self {
        PatchNode {
            schema: self.schema,
            node: Node::Type(ty),
        }
    }

    /// The node with pointers followed, as reflection's `Elem` does first.
    fn deref(&self) -> Node<'s> {
        let mut node = self.node;
        while let Node::Type(Type::Ptr(inner)) = node {
            node = Node::Type(inner);
        }
        match node {
            Node::Type(Type::Struct(id)) => Node::Struct(*id),
            other => other,
        }
    }

    /// Go's kind of the node (`struct`, `map`, `slice`, `string`, `ptr`, …).
    fn kind(node: Node<'_>) -> &'static str {
        match node {
            Node::Struct(_) => "struct",
            Node::Byte => "uint8",
            Node::Type(ty) => match ty {
                Type::String => "string",
                Type::Bool => "bool",
                Type::Int(i) => i.go_name(),
                Type::Float => "float64",
                Type::Bytes | Type::List(_) => "slice",
                Type::Map(_) => "map",
                Type::Any => "interface",
                Type::Ptr(_) => "ptr",
                Type::Time
                | Type::MicroTime
                | Type::Quantity
                | Type::IntOrString
                | Type::Raw
                | Type::Struct(_) => "struct",
            },
        }
    }

    /// The Go name of a struct without JSON fields of its own (the types with their own JSON).
    fn special_name(ty: &Type) -> &'static str {
        match ty {
            Type::Time => "Time",
            Type::MicroTime => "MicroTime",
            Type::Quantity => "Quantity",
            Type::IntOrString => "IntOrString",
            _ => "RawExtension",
        }
    }
}

impl<'s> LookupPatchMeta for PatchNode<'s> {
    fn lookup_patch_metadata_for_struct(
        &self,
        key: &str,
    ) -> Result<(Self, PatchMeta<'_>), LookupPatchMetaError> {
        let node = self.deref();
        let id = match node {
            Node::Struct(id) => id,
            Node::Type(
                ty
                @ (Type::Time | Type::MicroTime | Type::Quantity | Type::IntOrString | Type::Raw),
            ) => {
                return Err(LookupPatchMetaError::FieldNotFound {
                    struct_name: Self::special_name(ty).into(),
                    field: key.into(),
                });
            }
            other => {
                return Err(LookupPatchMetaError::NotAStruct {
                    kind: Self::kind(other).into(),
                });
            }
        };
        let st = self.schema.get(id);
        let field = st.field(key).or_else(|| {
            st.fields
                .iter()
                .find(|f| f.name.to_lowercase() == key.to_lowercase())
        });
        let Some(field) = field else {
            return Err(LookupPatchMetaError::FieldNotFound {
                struct_name: st.go_name().rsplit('.').next().unwrap_or_default().into(),
                field: key.into(),
            });
        };
        let meta = PatchMeta {
            patch_strategies: field.patch_strategy.as_deref().unwrap_or_default(),
            patch_merge_key: field.patch_merge_key.as_deref().unwrap_or_default(),
        };
        Ok((self.at(&field.ty), meta))
    }

    fn lookup_patch_metadata_for_slice(
        &self,
        key: &str,
    ) -> Result<(Self, PatchMeta<'_>), LookupPatchMetaError> {
        let parent = Self::kind(self.deref());
        let (field, meta) = self.lookup_patch_metadata_for_struct(key)?;
        let Node::Type(ty) = field.node else {
            return Err(LookupPatchMetaError::NotASlice {
                kind: parent.into(),
            });
        };
        let element = match ty {
            Type::Bytes => Node::Byte,
            Type::List(inner) => match &**inner {
                Type::List(_) | Type::Bytes => return Err(LookupPatchMetaError::SliceOfSlices),
                inner => Node::Type(inner),
            },
            Type::Ptr(inner) => match &**inner {
                Type::List(elem) => Node::Type(elem),
                Type::Bytes => Node::Byte,
                inner => Node::Type(inner),
            },
            _ => {
                return Err(LookupPatchMetaError::NotASlice {
                    kind: parent.into(),
                });
            }
        };
        Ok((
            PatchNode {
                schema: self.schema,
                node: element,
            },
            meta,
        ))
    }

    fn name(&self) -> &str {
        Self::kind(self.deref())
    }
}

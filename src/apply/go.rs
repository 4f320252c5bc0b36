//! hookscope's Go types ([`crate::schema::Schema`]) as a [`TypeModel`].

use serde_json::Value;

use super::typed::{Atom, ListRelationship, TypeModel};
use crate::schema::{Field, ListType, Schema, Type, TypeId};

/// A release's Go types, walked by server-side apply.
#[derive(Debug, Clone, Copy)]
pub struct GoModel<'s>(pub &'s Schema);

/// A type in a [`GoModel`]: a kind's struct, or the type of a field (with the field, whose
/// markers apply to its outermost list, map or struct) or of a list's or map's items.
#[derive(Debug, Clone, Copy)]
pub enum GoType<'s> {
    /// A struct type, as the root of a kind.
    Struct(TypeId),
    /// A value of this type, declared by this field when it is the field's own type.
    Value(&'s Type, Option<&'s Field>),
}

fn atomic_marker(field: Option<&Field>) -> bool {
    field.is_some_and(|f| f.map_type.as_deref() == Some("atomic"))
}

impl<'s> GoModel<'s> {
    fn deref(ty: GoType<'s>) -> GoType<'s> {
        let mut ty = ty;
        while let GoType::Value(Type::Ptr(inner), f) = ty {
            ty = GoType::Value(inner, f);
        }
        ty
    }

    fn struct_of(&self, ty: GoType<'s>) -> Option<(TypeId, Option<&'s Field>)> {
        match Self::deref(ty) {
            GoType::Struct(id) => Some((id, None)),
            GoType::Value(Type::Struct(id), f) => Some((*id, f)),
            GoType::Value(..) => None,
        }
    }
}

impl<'s> TypeModel for GoModel<'s> {
    type Type = GoType<'s>;

    fn atom(&self, ty: &GoType<'s>) -> Atom<'_> {
        if let Some((id, field)) = self.struct_of(*ty) {
            return Atom::Map {
                atomic: self.0.get(id).atomic || atomic_marker(field),
            };
        }
        match Self::deref(*ty) {
            GoType::Value(Type::List(_), field) => Atom::List(match field {
                Some(f) => match f.list_type {
                    Some(ListType::Set) => ListRelationship::Set,
                    Some(ListType::Map) => ListRelationship::Map(&f.list_map_keys),
                    Some(ListType::Atomic) => ListRelationship::Atomic,
                    // Without a list type, the apiserver's schema conversion reads the strategic
                    // merge patch markers: a merge key makes a map, a merge without one a set.
                    None => match (f.patch_strategy.as_deref(), &f.patch_merge_key) {
                        (Some("merge" | "merge,retainKeys"), Some(key)) => {
                            ListRelationship::Map(std::slice::from_ref(key))
                        }
                        (Some("merge" | "merge,retainKeys"), None) => ListRelationship::Set,
                        _ => ListRelationship::Atomic,
                    },
                },
                None => ListRelationship::Atomic,
            }),
            GoType::Value(Type::Map(_), field) => Atom::Map {
                atomic: atomic_marker(field),
            },
            _ => Atom::Scalar,
        }
    }

    fn element(&self, ty: &GoType<'s>) -> Option<GoType<'s>> {
        match Self::deref(*ty) {
            GoType::Value(Type::List(inner), _) => Some(GoType::Value(inner, None)),
            _ => None,
        }
    }

    fn field(&self, ty: &GoType<'s>, name: &str) -> Option<(GoType<'s>, bool)> {
        if let Some((id, _)) = self.struct_of(*ty) {
            let st: &'s crate::schema::Struct = self.0.get(id);
            let f = st.field(name)?;
            return Some((GoType::Value(&f.ty, Some(f)), true));
        }
        match Self::deref(*ty) {
            GoType::Value(Type::Map(inner), _) => Some((GoType::Value(inner, None), false)),
            _ => None,
        }
    }

    /// Kubernetes 1.34 moved to structured-merge-diff v6, which lets an item omit key fields.
    fn optional_keys(&self) -> bool {
        self.0.release().minor() >= 34
    }

    fn key_default(&self, item: &GoType<'s>, key: &str) -> Option<Value> {
        let (id, _) = self.struct_of(*item)?;
        let default = self.0.get(id).field(key)?.default.as_deref()?;
        crate::json::from_str(default).ok()
    }
}

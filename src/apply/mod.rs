//! Server-side apply as kube-apiserver's field manager does it, before admission.

pub mod fieldpath;

pub use fieldpath::{FieldsV1Error, Path, PathElement, Set};

//! Reading, defaulting and validating Mutating/ValidatingWebhookConfigurations
//! (`admissionregistration.k8s.io/v1` and `v1beta1`), as kube-apiserver does on create and update.
//!
//! * [`parse_documents`] / [`load_paths`]: YAML or JSON, multi-document streams and `*List`
//!   objects; every document yields a configuration or a [`LoadError`] naming file, document and
//!   field. Objects of other kinds (a release manifest's Namespaces, CRDs, Deployments…) yield
//!   [`LoadError::OtherKind`], which readers of manifests skip. Fields the API does not know are kept in [`LoadedConfiguration::unknown_fields`]
//!   (upstream drops them silently on a non-strict decode; hookscope reports them as notes).
//! * [`apply_defaults`]: the defaults of the configuration's version.
//! * [`validate`]: every error of `pkg/apis/admissionregistration/validation`, with upstream's
//!   field paths and texts, on create or (with the old object) on update.
//! * [`lint`]: best-practice warnings from the Dynamic Admission Control documentation.
//! * [`policy`]: ValidatingAdmissionPolicies and their bindings, read from the same files
//!   ([`parse_policy_documents`] / [`load_policy_paths`]), defaulted and validated.

use std::fmt;

mod defaults;
mod lint;
mod load;
pub mod policy;
pub mod typecheck;
mod url;
mod validate;
pub mod validation;

pub use defaults::apply_defaults;
pub use lint::{Lint, lint};
pub use load::{
    GROUP, V1, V1BETA1, load_paths, load_policy_paths, parse_documents, parse_policy_documents,
};
pub use policy::{LoadedPolicy, PolicyObject};
pub use validate::{FieldError, validate, validate_in};

/// Where one document came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// File name as given (`<stdin>` or similar for text not read from a file).
    pub file: String,
    /// 0-based index of the object in the file (displayed 1-based): each YAML document, and each item of a `*List`,
    /// counts as one.
    pub document: usize,
    /// 1-based line where the YAML document starts.
    pub line: Option<usize>,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.file, self.document + 1)?;
        if let Some(line) = self.line {
            write!(f, " (starting at line {line})")?;
        }
        Ok(())
    }
}

/// A configuration with where it came from and what defaulting did.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfiguration {
    /// Where it was read.
    pub source: Source,
    /// The configuration as written (defaults are applied by [`apply_defaults`]).
    pub configuration: crate::api::WebhookConfiguration,
    /// Defaults applied, e.g. `webhooks[0].failurePolicy: Fail`; empty until [`apply_defaults`]
    /// has been run and its result stored here.
    pub defaulted: Vec<String>,
    /// Field paths that the API does not know (e.g. `webhooks[0].timeoutSecond`); the apiserver
    /// ignores them, which usually hides a typo.
    pub unknown_fields: Vec<String>,
}

impl LoadedConfiguration {
    /// Does what the apiserver does to a configuration before validating its create: clears
    /// the namespace of this cluster-scoped object (`rest.BeforeCreate` sets it to the request's,
    /// none, instead of refusing it), then applies the defaults of its version; records both in
    /// `defaulted`.
    pub fn apply_defaults(&mut self) {
        if let Some(meta) = self.configuration.metadata.as_object_mut()
            && let Some(serde_json::Value::String(ns)) = meta.get("namespace")
            && !ns.is_empty()
        {
            self.defaulted.push(format!(
                "metadata.namespace: \"\" (was {ns:?}: cluster-scoped, the apiserver clears it)"
            ));
            meta.remove("namespace");
        }
        let applied = apply_defaults(&mut self.configuration);
        self.defaulted.extend(applied);
    }
}

/// Why a configuration could not be applied to a cluster of `version`, when its apiVersion is
/// no longer served there: `admissionregistration.k8s.io/v1beta1` configurations since 1.22.
/// kubectl then fails before any request reaches the apiserver (no REST mapping for the kind in
/// that version). An object created under v1beta1 before 1.22 still exists after an upgrade,
/// with the v1beta1 defaults it was stored with, which is how hookscope reads such a document.
pub fn unserved(
    cfg: &crate::api::WebhookConfiguration,
    version: crate::KubeVersion,
) -> Option<String> {
    (cfg.api_version == V1BETA1 && version.at_least(22)).then(|| {
        let kind = cfg.kind.configuration_kind();
        format!(
            "{V1BETA1} is not served since Kubernetes 1.22 (modelled: {version}): kubectl apply fails with 'no matches for kind \"{kind}\" in version \"{V1BETA1}\"'; read with v1beta1's defaults, as an object created before 1.22 and kept through upgrades would be; write it as {V1}"
        )
    })
}

fn item_note(item: &Option<usize>) -> String {
    item.map(|i| format!(", List item {}", i + 1))
        .unwrap_or_default()
}

/// Why a document could not be read as a webhook configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The file or folder could not be read.
    #[error("{file}: {message}")]
    Io {
        /// The path.
        file: String,
        /// The operating system's message.
        message: String,
    },
    /// The text is not valid YAML/JSON.
    #[error("{at}: YAML syntax error at line {line}, column {column}: {message}")]
    Syntax {
        /// The document.
        at: Source,
        /// 1-based line in the file.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The document is not a mapping.
    #[error("{at}: expected a Kubernetes object (a mapping), found {found}")]
    NotAnObject {
        /// The document.
        at: Source,
        /// What was found.
        found: String,
    },
    /// A kind of the removed `admissionregistration.k8s.io/v1alpha1` API.
    #[error(
        "{at}{}: kind {kind} ({api_version}) is no longer served: {}",
        item_note(item),
        removed_advice(kind)
    )]
    Removed {
        /// The document.
        at: Source,
        /// Index in the enclosing List, if any.
        item: Option<usize>,
        /// The kind.
        kind: String,
        /// The apiVersion as written.
        api_version: String,
    },
    /// Neither a Mutating- nor a ValidatingWebhookConfiguration.
    #[error(
        "{at}{}: kind {kind:?} (apiVersion {api_version:?}) is not a MutatingWebhookConfiguration or ValidatingWebhookConfiguration",
        item_note(item)
    )]
    UnknownKind {
        /// The document.
        at: Source,
        /// Index in the enclosing List, if any.
        item: Option<usize>,
        /// The kind as written (empty when missing).
        kind: String,
        /// The apiVersion as written.
        api_version: String,
    },
    /// A Kubernetes object of another kind (a Namespace, a Deployment, a CustomResourceDefinition,
    /// a ValidatingAdmissionPolicy, …), as release manifests mix them with webhook
    /// configurations. Not an error for readers of such manifests: they skip it.
    #[error(
        "{at}{}: {kind} {name:?} ({api_version}) is not a webhook configuration",
        item_note(item)
    )]
    OtherKind {
        /// The document.
        at: Source,
        /// Index in the enclosing List, if any.
        item: Option<usize>,
        /// The kind.
        kind: String,
        /// The apiVersion.
        api_version: Box<str>,
        /// `metadata.name`, empty when absent.
        name: Box<str>,
    },
    /// A webhook configuration kind under an apiVersion other than v1 and v1beta1.
    #[error(
        "{at}{}: {kind} is not served as apiVersion {api_version:?}; use admissionregistration.k8s.io/v1 (or admissionregistration.k8s.io/v1beta1, served until Kubernetes 1.21)",
        item_note(item)
    )]
    UnsupportedVersion {
        /// The document.
        at: Source,
        /// Index in the enclosing List, if any.
        item: Option<usize>,
        /// The kind.
        kind: String,
        /// The apiVersion as written.
        api_version: String,
    },
    /// A field holds a value of the wrong type.
    #[error("{at}{}: {field}: {message}", item_note(item))]
    FieldType {
        /// The document.
        at: Source,
        /// Index in the enclosing List, if any.
        item: Option<usize>,
        /// JSON path of the field, e.g. `webhooks[1].timeoutSeconds`.
        field: String,
        /// What was expected and found.
        message: String,
    },
}

impl LoadError {
    /// The file and, when the error concerns one document, its 1-based number.
    pub fn location(&self) -> (&str, Option<usize>) {
        match self {
            LoadError::Io { file, .. } => (file, None),
            LoadError::Syntax { at, .. }
            | LoadError::NotAnObject { at, .. }
            | LoadError::Removed { at, .. }
            | LoadError::UnknownKind { at, .. }
            | LoadError::OtherKind { at, .. }
            | LoadError::UnsupportedVersion { at, .. }
            | LoadError::FieldType { at, .. } => (&at.file, Some(at.document + 1)),
        }
    }

    /// Whether this is an object of another kind ([`LoadError::OtherKind`]), which readers of
    /// release manifests skip rather than report.
    pub fn is_other_kind(&self) -> bool {
        matches!(self, LoadError::OtherKind { .. })
    }
}

fn removed_advice(kind: &str) -> &'static str {
    if kind == "ExternalAdmissionHookConfiguration" {
        "ExternalAdmissionHookConfiguration (admissionregistration.k8s.io/v1alpha1, alpha in Kubernetes 1.7 and 1.8) was removed in Kubernetes 1.9 and replaced by MutatingWebhookConfiguration and ValidatingWebhookConfiguration; the rest of admissionregistration.k8s.io/v1alpha1 was removed in Kubernetes 1.14. Rewrite it as an admissionregistration.k8s.io/v1 MutatingWebhookConfiguration or ValidatingWebhookConfiguration (its externalAdmissionHooks become webhooks, and v1 requires sideEffects and admissionReviewVersions)"
    } else {
        "InitializerConfiguration (admissionregistration.k8s.io/v1alpha1) was removed in Kubernetes 1.14 together with initializers; use an admissionregistration.k8s.io/v1 MutatingWebhookConfiguration instead"
    }
}

//! Kubernetes API types hookscope reads and writes: the admissionregistration configurations, the
//! AdmissionReview wire format, and the small `meta/v1` vocabulary they share.

pub mod admission;
pub mod admissionregistration;
pub mod meta;
pub mod policy;

pub use admissionregistration::{
    MatchCondition, RuleWithOperations, ServiceReference, Webhook, WebhookClientConfig,
    WebhookConfiguration, WebhookKind,
};
pub use meta::{
    GroupResource, GroupVersionKind, GroupVersionResource, LabelSelector, LabelSelectorRequirement,
    Operation, Status, StatusCause, StatusDetails, UserInfo,
};

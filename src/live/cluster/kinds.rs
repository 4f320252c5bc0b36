//! The admission configuration kinds `live` watches, and the API versions a server serves them
//! in (found by discovery, as kubectl finds them).

use std::fmt;

use kube::api::ApiResource;

use crate::api::WebhookKind;

/// A kind of admission configuration: the two webhook configurations, and the admission
/// policies with their bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AdmissionKind {
    /// `MutatingWebhookConfiguration`.
    MutatingWebhookConfiguration,
    /// `ValidatingWebhookConfiguration`.
    ValidatingWebhookConfiguration,
    /// `MutatingAdmissionPolicy`.
    MutatingAdmissionPolicy,
    /// `MutatingAdmissionPolicyBinding`.
    MutatingAdmissionPolicyBinding,
    /// `ValidatingAdmissionPolicy`.
    ValidatingAdmissionPolicy,
    /// `ValidatingAdmissionPolicyBinding`.
    ValidatingAdmissionPolicyBinding,
}

/// An API version of `admissionregistration.k8s.io`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupVersion {
    /// `v1`.
    V1,
    /// `v1beta1`.
    V1beta1,
    /// `v1alpha1`.
    V1alpha1,
}

impl GroupVersion {
    /// Every version, most stable first (the order a client prefers them in).
    pub const ALL: [GroupVersion; 3] = [
        GroupVersion::V1,
        GroupVersion::V1beta1,
        GroupVersion::V1alpha1,
    ];

    /// `v1`, `v1beta1`, `v1alpha1`.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupVersion::V1 => "v1",
            GroupVersion::V1beta1 => "v1beta1",
            GroupVersion::V1alpha1 => "v1alpha1",
        }
    }

    /// The version called `name`.
    pub fn parse(name: &str) -> Option<GroupVersion> {
        GroupVersion::ALL.into_iter().find(|v| v.as_str() == name)
    }

    /// `admissionregistration.k8s.io/<version>`.
    pub fn api_version(self) -> String {
        format!("{}/{}", crate::config::GROUP, self.as_str())
    }
}

impl fmt::Display for GroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AdmissionKind {
    /// Every kind, in the order the watchers start and the console lists their feeds: the
    /// webhook configurations, then the validating policies and bindings, then the mutating ones.
    pub const ALL: [AdmissionKind; 6] = [
        AdmissionKind::MutatingWebhookConfiguration,
        AdmissionKind::ValidatingWebhookConfiguration,
        AdmissionKind::ValidatingAdmissionPolicy,
        AdmissionKind::ValidatingAdmissionPolicyBinding,
        AdmissionKind::MutatingAdmissionPolicy,
        AdmissionKind::MutatingAdmissionPolicyBinding,
    ];

    /// The four policy kinds.
    pub const POLICIES: [AdmissionKind; 4] = [
        AdmissionKind::ValidatingAdmissionPolicy,
        AdmissionKind::ValidatingAdmissionPolicyBinding,
        AdmissionKind::MutatingAdmissionPolicy,
        AdmissionKind::MutatingAdmissionPolicyBinding,
    ];

    /// The kind as objects spell it (`ValidatingAdmissionPolicyBinding`).
    pub fn kind(self) -> &'static str {
        match self {
            AdmissionKind::MutatingWebhookConfiguration => "MutatingWebhookConfiguration",
            AdmissionKind::ValidatingWebhookConfiguration => "ValidatingWebhookConfiguration",
            AdmissionKind::MutatingAdmissionPolicy => "MutatingAdmissionPolicy",
            AdmissionKind::MutatingAdmissionPolicyBinding => "MutatingAdmissionPolicyBinding",
            AdmissionKind::ValidatingAdmissionPolicy => "ValidatingAdmissionPolicy",
            AdmissionKind::ValidatingAdmissionPolicyBinding => "ValidatingAdmissionPolicyBinding",
        }
    }

    /// The API resource (`validatingadmissionpolicybindings`).
    pub fn resource(self) -> &'static str {
        match self {
            AdmissionKind::MutatingWebhookConfiguration => "mutatingwebhookconfigurations",
            AdmissionKind::ValidatingWebhookConfiguration => "validatingwebhookconfigurations",
            AdmissionKind::MutatingAdmissionPolicy => "mutatingadmissionpolicies",
            AdmissionKind::MutatingAdmissionPolicyBinding => "mutatingadmissionpolicybindings",
            AdmissionKind::ValidatingAdmissionPolicy => "validatingadmissionpolicies",
            AdmissionKind::ValidatingAdmissionPolicyBinding => "validatingadmissionpolicybindings",
        }
    }

    /// A short name for narrow columns: `mutating` and `validating` for the webhook
    /// configurations (as before policies were watched), `VAP`, `VAPB`, `MAP`, `MAPB`.
    pub fn short(self) -> &'static str {
        match self {
            AdmissionKind::MutatingWebhookConfiguration => "mutating",
            AdmissionKind::ValidatingWebhookConfiguration => "validating",
            AdmissionKind::MutatingAdmissionPolicy => "MAP",
            AdmissionKind::MutatingAdmissionPolicyBinding => "MAPB",
            AdmissionKind::ValidatingAdmissionPolicy => "VAP",
            AdmissionKind::ValidatingAdmissionPolicyBinding => "VAPB",
        }
    }

    /// The webhook kind of a webhook configuration (None for the policy kinds).
    pub fn webhook(self) -> Option<WebhookKind> {
        match self {
            AdmissionKind::MutatingWebhookConfiguration => Some(WebhookKind::Mutating),
            AdmissionKind::ValidatingWebhookConfiguration => Some(WebhookKind::Validating),
            _ => None,
        }
    }

    /// Whether this is one of the four policy kinds.
    pub fn is_policy(self) -> bool {
        self.webhook().is_none()
    }

    /// The version a server is assumed to serve without asking: `v1` for the webhook
    /// configurations (served by every release hookscope models); None for the policy kinds,
    /// whose versions discovery finds.
    pub fn fixed_version(self) -> Option<GroupVersion> {
        self.webhook().map(|_| GroupVersion::V1)
    }

    /// The kind's [`ApiResource`] at `version`.
    pub fn api_resource(self, version: GroupVersion) -> ApiResource {
        ApiResource {
            group: crate::config::GROUP.to_string(),
            version: version.as_str().to_string(),
            api_version: version.api_version(),
            kind: self.kind().to_string(),
            plural: self.resource().to_string(),
        }
    }

    /// The position in [`AdmissionKind::ALL`].
    pub(crate) fn index(self) -> usize {
        AdmissionKind::ALL
            .iter()
            .position(|k| *k == self)
            .unwrap_or_default()
    }
}

impl From<WebhookKind> for AdmissionKind {
    fn from(kind: WebhookKind) -> AdmissionKind {
        match kind {
            WebhookKind::Mutating => AdmissionKind::MutatingWebhookConfiguration,
            WebhookKind::Validating => AdmissionKind::ValidatingWebhookConfiguration,
        }
    }
}

impl fmt::Display for AdmissionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())
    }
}

/// What discovery found the server serving of one kind: the version watched (the most stable
/// one that lists it), or None when no version of the group lists it (kubectl would say
/// `the server doesn't have a resource type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    /// The kind.
    pub kind: AdmissionKind,
    /// The version watched, if served.
    pub version: Option<GroupVersion>,
}

/// Picks, for each policy kind, the most stable version whose resource list (`versions`: each
/// version the group serves, with the resources it lists) names its resource.
pub fn pick_versions<'a>(
    versions: impl IntoIterator<Item = (&'a str, Vec<String>)>,
) -> Vec<Served> {
    let lists: Vec<(GroupVersion, Vec<String>)> = versions
        .into_iter()
        .filter_map(|(v, resources)| GroupVersion::parse(v).map(|v| (v, resources)))
        .collect();
    AdmissionKind::POLICIES
        .into_iter()
        .map(|kind| Served {
            kind,
            version: GroupVersion::ALL.into_iter().find(|v| {
                lists
                    .iter()
                    .any(|(lv, rs)| lv == v && rs.iter().any(|r| r == kind.resource()))
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_stable_version_listing_a_kind_is_watched_and_a_missing_one_is_not_served() {
        // 1.33 with MutatingAdmissionPolicy's v1alpha1 switched on.
        let served = pick_versions([
            (
                "v1",
                vec![
                    "validatingadmissionpolicies".to_string(),
                    "validatingadmissionpolicies/status".to_string(),
                    "validatingadmissionpolicybindings".to_string(),
                ],
            ),
            (
                "v1beta1",
                vec![
                    "validatingadmissionpolicies".to_string(),
                    "validatingadmissionpolicybindings".to_string(),
                ],
            ),
            (
                "v1alpha1",
                vec![
                    "mutatingadmissionpolicies".to_string(),
                    "mutatingadmissionpolicybindings".to_string(),
                ],
            ),
        ]);
        let by_kind = |k| served.iter().find(|s| s.kind == k).and_then(|s| s.version);
        assert_eq!(
            by_kind(AdmissionKind::ValidatingAdmissionPolicy),
            Some(GroupVersion::V1)
        );
        assert_eq!(
            by_kind(AdmissionKind::MutatingAdmissionPolicyBinding),
            Some(GroupVersion::V1alpha1)
        );
        // 1.31 serves no mutating policy at all; an unknown version is passed over.
        let served = pick_versions([("v2", vec!["mutatingadmissionpolicies".to_string()])]);
        assert!(served.iter().all(|s| s.version.is_none()));
    }
}

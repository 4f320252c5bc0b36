//! What differs in scheme defaulting from one release to the next: fields that exist from a given
//! release, defaults added in a given release, and defaults behind feature gates, taken at the
//! gate's default state in that release (a cluster that flips a gate is not modelled).

use crate::KubeVersion;

/// The release-dependent switches of scheme defaulting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Features {
    /// 1.29+: a ClusterIP Service with `externalIPs` is externally accessible, so it gets
    /// `externalTrafficPolicy: Cluster` (before, only NodePort and LoadBalancer did).
    pub external_traffic_policy_for_external_ips: bool,
    /// `LoadBalancerIPMode` (beta, on from 1.30; GA 1.32): `status.loadBalancer.ingress[].ipMode`
    /// defaults to `VIP` on LoadBalancer Services.
    pub load_balancer_ip_mode: bool,
    /// 1.31+: `VolumeSource.image` exists, so a volume with only an image source is not empty.
    pub image_volume_source: bool,
    /// `ImageVolume` (alpha 1.31, beta off 1.33, beta on from 1.35): an image volume's
    /// `pullPolicy` defaults from its reference's tag.
    pub image_volume_pull_policy: bool,
    /// 1.32+: the pod-level `spec.resources` exists and its quantities are rounded.
    pub pod_level_resources_field: bool,
    /// `PodLevelResources` (alpha 1.32, beta on from 1.34): pod-level requests and limits are
    /// defaulted from the containers'.
    pub pod_level_resources: bool,
    /// 1.34+: `env[].valueFrom.fileKeyRef` exists, with the declarative default `optional: false`.
    pub file_key_ref: bool,
    /// `JobPodReplacementPolicy` (alpha 1.28, beta on from 1.29, GA 1.34).
    pub job_pod_replacement_policy: bool,
    /// 1.29+: a Job's `manualSelector` defaults to `false`.
    pub job_manual_selector: bool,
    /// `MaxUnavailableStatefulSet` (alpha to 1.34, beta on from 1.35): a StatefulSet's
    /// `rollingUpdate.maxUnavailable` defaults to 1.
    pub max_unavailable_stateful_set: bool,
    /// 1.33+: HPA scaling rules have `tolerance`, kept when the rules are defaulted.
    pub hpa_scaling_tolerance: bool,
}

impl Features {
    /// The switches of `release`.
    pub(super) fn of(release: KubeVersion) -> Self {
        let from = |minor| release.at_least(minor);
        Features {
            external_traffic_policy_for_external_ips: from(29),
            load_balancer_ip_mode: from(30),
            image_volume_source: from(31),
            image_volume_pull_policy: from(35),
            pod_level_resources_field: from(32),
            pod_level_resources: from(34),
            file_key_ref: from(34),
            job_pod_replacement_policy: from(29),
            job_manual_selector: from(29),
            max_unavailable_stateful_set: from(35),
            hpa_scaling_tolerance: from(33),
        }
    }
}

//! The built-in resources kube-apiserver serves by default, per release (1.28 to 1.37).
//!
//! Sources: kubernetes/kubernetes `pkg/controlplane/instance.go` (`DefaultAPIResourceConfigSource`:
//! stable group versions, `legacyBetaEnabledByDefaultResources`; beta APIs introduced after 1.24 are
//! off by default), `pkg/registry/**/rest/storage_*.go` (resources, subresources, feature gates),
//! `pkg/features/kube_features.go` (gate defaults per release), the checked-in discovery documents
//! `api/discovery/*.json` (kinds, scope) and `pkg/kubeapiserver/default_storage_factory_builder.go`
//! (etcd resource prefixes = the equivalence key, see [`storage_key`]).
//!
//! Rows are in registration order: the legacy core group first, then the API groups in the order of
//! `restStorageProviders`, and inside a group the versions in the scheme's priority order (preferred
//! first), which is the order `installAPIResources` registers them in. The order only matters
//! inside one equivalence class (the versions of one group, and core/`events.k8s.io` events).
//!
//! Uncertain entries (not read from the release's own source) are marked `UNCERTAIN`.

/// A subresource of a [`Row`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Sub {
    /// Subresource name.
    pub name: &'static str,
    /// Kind: `""` = the parent's kind; `"Kind"` = that kind in the parent's group/version;
    /// `"group/version Kind"` (or `"v1 Kind"` for core) = an explicit group/version.
    pub kind: &'static str,
    /// First release serving it (0 = as long as the parent).
    pub since: u32,
}

/// One served resource at one group/version, for a range of releases.
#[derive(Debug, Clone, Copy)]
pub(super) struct Row {
    pub group: &'static str,
    pub version: &'static str,
    pub resource: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// First release serving it by default (inclusive).
    pub since: u32,
    /// Last release serving it by default (inclusive).
    pub until: u32,
    pub subs: &'static [Sub],
}

impl Row {
    const fn since(mut self, minor: u32) -> Self {
        self.since = minor;
        self
    }
    const fn until(mut self, minor: u32) -> Self {
        self.until = minor;
        self
    }
}

const NS: bool = true;
const CL: bool = false;

const fn row(
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    subs: &'static [Sub],
) -> Row {
    Row {
        group,
        version,
        resource,
        kind,
        namespaced,
        since: 0,
        until: u32::MAX,
        subs,
    }
}

const fn sub(name: &'static str, kind: &'static str) -> Sub {
    Sub {
        name,
        kind,
        since: 0,
    }
}

const STATUS: Sub = sub("status", "");
const SCALE: Sub = sub("scale", "autoscaling/v1 Scale");
const S: &[Sub] = &[STATUS];
const NONE: &[Sub] = &[];

const AR: &str = "admissionregistration.k8s.io";
const FC: &str = "flowcontrol.apiserver.k8s.io";
const NET: &str = "networking.k8s.io";
const RBAC: &str = "rbac.authorization.k8s.io";
const STO: &str = "storage.k8s.io";
const RES: &str = "resource.k8s.io";
const CERT: &str = "certificates.k8s.io";
const AUTHN: &str = "authentication.k8s.io";
const AUTHZ: &str = "authorization.k8s.io";

/// Every built-in resource, in registration order.
pub(super) const ROWS: &[Row] = &[
    // ---- core (legacy group, installed first) ----
    row("", "v1", "bindings", "Binding", NS, NONE),
    row("", "v1", "componentstatuses", "ComponentStatus", CL, NONE),
    row("", "v1", "configmaps", "ConfigMap", NS, NONE),
    row("", "v1", "endpoints", "Endpoints", NS, NONE),
    row("", "v1", "events", "Event", NS, NONE),
    row("", "v1", "limitranges", "LimitRange", NS, NONE),
    row(
        "",
        "v1",
        "namespaces",
        "Namespace",
        CL,
        &[sub("finalize", ""), STATUS],
    ),
    row(
        "",
        "v1",
        "nodes",
        "Node",
        CL,
        &[sub("proxy", "NodeProxyOptions"), STATUS],
    ),
    row(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        NS,
        S,
    ),
    row("", "v1", "persistentvolumes", "PersistentVolume", CL, S),
    row(
        "",
        "v1",
        "pods",
        "Pod",
        NS,
        &[
            sub("attach", "PodAttachOptions"),
            sub("binding", "Binding"),
            sub("ephemeralcontainers", ""),
            sub("eviction", "policy/v1 Eviction"),
            sub("exec", "PodExecOptions"),
            // pods/log registers the Pod kind (LogREST.New returns a Pod).
            sub("log", ""),
            sub("portforward", "PodPortForwardOptions"),
            sub("proxy", "PodProxyOptions"),
            // Registered only with the InPlacePodVerticalScaling gate: beta and on by default
            // from 1.33 (alpha, off, before; GA 1.35).
            Sub {
                name: "resize",
                kind: "",
                since: 33,
            },
            STATUS,
        ],
    ),
    row("", "v1", "podtemplates", "PodTemplate", NS, NONE),
    row(
        "",
        "v1",
        "replicationcontrollers",
        "ReplicationController",
        NS,
        &[SCALE, STATUS],
    ),
    row("", "v1", "resourcequotas", "ResourceQuota", NS, S),
    row("", "v1", "secrets", "Secret", NS, NONE),
    row(
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        NS,
        &[sub("token", "authentication.k8s.io/v1 TokenRequest")],
    ),
    row(
        "",
        "v1",
        "services",
        "Service",
        NS,
        &[sub("proxy", "ServiceProxyOptions"), STATUS],
    ),
    // ---- authentication.k8s.io ----
    // selfsubjectreviews GA in 1.28 (v1beta1/v1alpha1 off by default).
    row(
        AUTHN,
        "v1",
        "selfsubjectreviews",
        "SelfSubjectReview",
        CL,
        NONE,
    ),
    row(AUTHN, "v1", "tokenreviews", "TokenReview", CL, NONE),
    // ---- authorization.k8s.io ----
    row(
        AUTHZ,
        "v1",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        NS,
        NONE,
    ),
    row(
        AUTHZ,
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        CL,
        NONE,
    ),
    row(
        AUTHZ,
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        CL,
        NONE,
    ),
    row(
        AUTHZ,
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        CL,
        NONE,
    ),
    // ---- autoscaling (priority v2, v1) ----
    row(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        NS,
        S,
    ),
    row(
        "autoscaling",
        "v1",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        NS,
        S,
    ),
    // ---- batch ----
    row("batch", "v1", "cronjobs", "CronJob", NS, S),
    row("batch", "v1", "jobs", "Job", NS, S),
    // ---- certificates.k8s.io ----
    row(
        CERT,
        "v1",
        "certificatesigningrequests",
        "CertificateSigningRequest",
        CL,
        &[sub("approval", ""), STATUS],
    ),
    // ClusterTrustBundle and PodCertificateRequest GA (v1, gates on by default) in 1.37
    // (kubernetes PRs #139437, #139579); v1alpha1/v1beta1 were never on by default. UNCERTAIN:
    // read from the 1.37 development line, not a released tag.
    row(
        CERT,
        "v1",
        "clustertrustbundles",
        "ClusterTrustBundle",
        CL,
        NONE,
    )
    .since(37),
    row(
        CERT,
        "v1",
        "podcertificaterequests",
        "PodCertificateRequest",
        NS,
        S,
    )
    .since(37),
    // ---- coordination.k8s.io (leasecandidates: alpha/beta, off by default) ----
    row("coordination.k8s.io", "v1", "leases", "Lease", NS, NONE),
    // ---- discovery.k8s.io ----
    row(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        NS,
        NONE,
    ),
    // ---- networking.k8s.io ----
    row(NET, "v1", "ingressclasses", "IngressClass", CL, NONE),
    row(NET, "v1", "ingresses", "Ingress", NS, S),
    // MultiCIDRServiceAllocator: v1 GA in 1.33 (v1beta1 1.31-1.32 off by default).
    row(NET, "v1", "ipaddresses", "IPAddress", CL, NONE).since(33),
    row(NET, "v1", "networkpolicies", "NetworkPolicy", NS, NONE),
    row(NET, "v1", "servicecidrs", "ServiceCIDR", CL, S).since(33),
    // ---- node.k8s.io ----
    row(
        "node.k8s.io",
        "v1",
        "runtimeclasses",
        "RuntimeClass",
        CL,
        NONE,
    ),
    // ---- policy ----
    row(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        NS,
        S,
    ),
    // ---- rbac.authorization.k8s.io ----
    row(
        RBAC,
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        CL,
        NONE,
    ),
    row(RBAC, "v1", "clusterroles", "ClusterRole", CL, NONE),
    row(RBAC, "v1", "rolebindings", "RoleBinding", NS, NONE),
    row(RBAC, "v1", "roles", "Role", NS, NONE),
    // ---- scheduling.k8s.io (workloads/podgroups: alpha/beta gates, off by default) ----
    row(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        CL,
        NONE,
    ),
    // ---- storage.k8s.io ----
    row(STO, "v1", "csidrivers", "CSIDriver", CL, NONE),
    row(STO, "v1", "csinodes", "CSINode", CL, NONE),
    row(
        STO,
        "v1",
        "csistoragecapacities",
        "CSIStorageCapacity",
        NS,
        NONE,
    ),
    row(STO, "v1", "storageclasses", "StorageClass", CL, NONE),
    row(STO, "v1", "volumeattachments", "VolumeAttachment", CL, S),
    // VolumeAttributesClass GA (v1) in 1.34; v1beta1 (1.31-1.33) off by default.
    row(
        STO,
        "v1",
        "volumeattributesclasses",
        "VolumeAttributesClass",
        CL,
        NONE,
    )
    .since(34),
    // ---- storagemigration.k8s.io ----
    // StorageVersionMigrator GA (v1, on by default) in 1.37 (PR #138560); v1alpha1/v1beta1 off.
    // UNCERTAIN: read from the 1.37 development line.
    row(
        "storagemigration.k8s.io",
        "v1",
        "storageversionmigrations",
        "StorageVersionMigration",
        CL,
        S,
    )
    .since(37),
    // ---- flowcontrol.apiserver.k8s.io (priority v1, v1beta3, v1beta2) ----
    // v1 GA in 1.29; v1beta3 legacy-enabled until removal in 1.32; v1beta2 removed in 1.29.
    row(FC, "v1", "flowschemas", "FlowSchema", CL, S).since(29),
    row(
        FC,
        "v1",
        "prioritylevelconfigurations",
        "PriorityLevelConfiguration",
        CL,
        S,
    )
    .since(29),
    row(FC, "v1beta3", "flowschemas", "FlowSchema", CL, S).until(31),
    row(
        FC,
        "v1beta3",
        "prioritylevelconfigurations",
        "PriorityLevelConfiguration",
        CL,
        S,
    )
    .until(31),
    row(FC, "v1beta2", "flowschemas", "FlowSchema", CL, S).until(28),
    row(
        FC,
        "v1beta2",
        "prioritylevelconfigurations",
        "PriorityLevelConfiguration",
        CL,
        S,
    )
    .until(28),
    // ---- apps ----
    row(
        "apps",
        "v1",
        "controllerrevisions",
        "ControllerRevision",
        NS,
        NONE,
    ),
    row("apps", "v1", "daemonsets", "DaemonSet", NS, S),
    row(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        NS,
        &[SCALE, STATUS],
    ),
    row(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        NS,
        &[SCALE, STATUS],
    ),
    row(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        NS,
        &[SCALE, STATUS],
    ),
    // ---- admissionregistration.k8s.io ----
    // MutatingAdmissionPolicy GA (v1) in 1.36 (PR #136039); v1alpha1 (1.32), v1beta1 (1.34) off.
    row(
        AR,
        "v1",
        "mutatingadmissionpolicies",
        "MutatingAdmissionPolicy",
        CL,
        NONE,
    )
    .since(36),
    row(
        AR,
        "v1",
        "mutatingadmissionpolicybindings",
        "MutatingAdmissionPolicyBinding",
        CL,
        NONE,
    )
    .since(36),
    row(
        AR,
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        CL,
        NONE,
    ),
    // ValidatingAdmissionPolicy GA (v1) in 1.30; v1beta1 (1.28) is off by default.
    row(
        AR,
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        CL,
        S,
    )
    .since(30),
    row(
        AR,
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        CL,
        NONE,
    )
    .since(30),
    row(
        AR,
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        CL,
        NONE,
    ),
    // ---- events.k8s.io (shares storage with core events; registered after it) ----
    row("events.k8s.io", "v1", "events", "Event", NS, NONE),
    // ---- resource.k8s.io ----
    // DynamicResourceAllocation GA (v1, on by default) in 1.34; earlier versions (v1alpha2,
    // v1alpha3, v1beta1, v1beta2) are off by default.
    row(RES, "v1", "deviceclasses", "DeviceClass", CL, NONE).since(34),
    // DRADeviceTaintRules GA in 1.37. UNCERTAIN: served at v1 with a status subresource, read
    // from the 1.37 development line.
    row(RES, "v1", "devicetaintrules", "DeviceTaintRule", CL, S).since(37),
    row(RES, "v1", "resourceclaims", "ResourceClaim", NS, S).since(34),
    row(
        RES,
        "v1",
        "resourceclaimtemplates",
        "ResourceClaimTemplate",
        NS,
        NONE,
    )
    .since(34),
    row(RES, "v1", "resourceslices", "ResourceSlice", CL, NONE).since(34),
    // ---- apiextensions-apiserver and kube-aggregator (delegated servers) ----
    row(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        CL,
        S,
    ),
    row(
        "apiregistration.k8s.io",
        "v1",
        "apiservices",
        "APIService",
        CL,
        S,
    ),
];

/// The equivalence key kube-apiserver uses for a built-in resource: its etcd resource prefix
/// (`DefaultStorageFactory.ResourcePrefix`): the lowercased resource name, except for the
/// `SpecialDefaultResourcePrefixes`. Cohabitating resources (core/`events.k8s.io` events) resolve to
/// the same prefix.
pub(super) fn storage_key(group: &str, resource: &str) -> &'static str {
    match (group, resource) {
        ("", "replicationcontrollers") => "controllers",
        ("", "endpoints") => "services/endpoints",
        ("", "nodes") => "minions",
        ("", "services") => "services/specs",
        ("networking.k8s.io" | "extensions", "ingresses") => "ingress",
        _ => "",
    }
}

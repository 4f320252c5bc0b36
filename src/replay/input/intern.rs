//! One copy of what the requests of a capture have in common: the requesting users, the options
//! objects and the namespace labels repeat from request to request, so the requests loaded from
//! one capture refer to shared allocations instead of holding a copy each.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Arc;

use serde_json::Value;

use crate::api::UserInfo;
use crate::engine::shared_copy;
use crate::replay::{CapturedRequest, NamespaceState};

/// Distinct options objects kept for sharing, most recent last. Captures use few (one per
/// operation, a field manager or two); they are compared by value, so the list stays short.
const MAX_OPTIONS: usize = 16;

/// Shares users, options and namespace labels between the requests of a capture.
#[derive(Debug, Default)]
pub struct Interner {
    users: HashSet<Arc<UserInfo>>,
    labels: HashSet<Arc<BTreeMap<String, String>>>,
    options: VecDeque<Arc<Value>>,
}

impl Interner {
    /// The shared copy of `user`.
    pub fn user(&mut self, user: Arc<UserInfo>) -> Arc<UserInfo> {
        shared_copy(&mut self.users, user)
    }

    /// The shared copy of a namespace's `labels`.
    pub fn labels(
        &mut self,
        labels: Arc<BTreeMap<String, String>>,
    ) -> Arc<BTreeMap<String, String>> {
        shared_copy(&mut self.labels, labels)
    }

    /// The shared copy of `options`.
    pub fn options(&mut self, options: Arc<Value>) -> Arc<Value> {
        if let Some(known) = self.options.iter().find(|o| **o == options) {
            return Arc::clone(known);
        }
        if self.options.len() >= MAX_OPTIONS {
            self.options.pop_front();
        }
        self.options.push_back(Arc::clone(&options));
        options
    }

    /// Replaces the request's user, options and namespace labels by their shared copies.
    pub fn request(&mut self, request: &mut CapturedRequest) {
        let attrs = &mut request.attrs;
        attrs.user_info = self.user(std::mem::take(&mut attrs.user_info));
        if let Some(options) = attrs.options.take() {
            attrs.options = Some(self.options(options));
        }
        if let NamespaceState::Known(labels) = &mut request.namespace {
            *labels = self.labels(std::mem::take(labels));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_users_and_options_share_one_allocation() {
        let mut i = Interner::default();
        let user = |name: &str| {
            Arc::new(UserInfo {
                username: name.into(),
                groups: vec!["system:authenticated".into()],
                ..UserInfo::default()
            })
        };
        let a = i.user(user("alice"));
        let b = i.user(user("alice"));
        let c = i.user(user("bob"));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(c.username, "bob");

        let create = || Arc::new(serde_json::json!({"kind": "CreateOptions"}));
        let x = i.options(create());
        let y = i.options(create());
        let z = i.options(Arc::new(serde_json::json!({"kind": "UpdateOptions"})));
        assert!(Arc::ptr_eq(&x, &y));
        assert_eq!(z["kind"], "UpdateOptions");
    }

    #[test]
    fn the_options_kept_are_bounded() {
        let mut i = Interner::default();
        let first = i.options(Arc::new(serde_json::json!({"n": 0})));
        for n in 1..=MAX_OPTIONS {
            i.options(Arc::new(serde_json::json!({ "n": n })));
        }
        assert_eq!(i.options.len(), MAX_OPTIONS);
        let again = i.options(Arc::new(serde_json::json!({"n": 0})));
        assert!(!Arc::ptr_eq(&first, &again));
        assert_eq!(first, again);
    }
}

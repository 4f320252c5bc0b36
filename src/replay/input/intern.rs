//! One copy of what the requests of a capture have in common: the requesting users, the options
//! objects and the namespace labels repeat from request to request, so the requests loaded from
//! one capture refer to shared allocations instead of holding a copy each. Users and options
//! read from text are also found by that text, so that a repeated one is not parsed again.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use serde_json::Value;

use crate::api::UserInfo;
use crate::engine::shared_copy;
use crate::replay::{CapturedRequest, NamespaceState};

/// Distinct options objects kept for sharing, most recent last. Captures use few (one per
/// operation, a field manager or two); they are compared by value, so the list stays short.
const MAX_OPTIONS: usize = 16;

/// Texts of users kept for lookup; the map starts over when it is full.
const MAX_USER_TEXTS: usize = 256;

/// Longest text kept for lookup (users and options are a few hundred bytes).
const MAX_TEXT: usize = 4096;

/// Shares users, options and namespace labels between the requests of a capture.
#[derive(Debug, Default)]
pub struct Interner {
    users: HashSet<Arc<UserInfo>>,
    labels: HashSet<Arc<BTreeMap<String, String>>>,
    options: VecDeque<Arc<Value>>,
    user_texts: HashMap<Box<[u8]>, Arc<UserInfo>>,
    option_texts: VecDeque<(Box<[u8]>, Arc<Value>)>,
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
        self.namespace(&mut request.namespace);
    }

    /// Replaces known namespace labels by their shared copy.
    pub(crate) fn namespace(&mut self, state: &mut NamespaceState) {
        if let NamespaceState::Known(labels) = state {
            *labels = self.labels(std::mem::take(labels));
        }
    }

    /// The shared copy of the user written as `text` (the exact bytes of a JSON value, always
    /// found at the same place in a document): the one read before from the same text, else
    /// `parse()`'s. `None` when `parse` fails.
    pub(crate) fn user_text(
        &mut self,
        text: &[u8],
        parse: impl FnOnce() -> Option<UserInfo>,
    ) -> Option<Arc<UserInfo>> {
        if let Some(known) = self.user_texts.get(text) {
            return Some(Arc::clone(known));
        }
        let user = self.user(Arc::new(parse()?));
        if text.len() <= MAX_TEXT {
            if self.user_texts.len() >= MAX_USER_TEXTS {
                self.user_texts.clear();
            }
            self.user_texts.insert(text.into(), Arc::clone(&user));
        }
        Some(user)
    }

    /// The shared copy of the options object written as `text` (as for
    /// [`user_text`](Self::user_text)).
    pub(crate) fn options_text(
        &mut self,
        text: &[u8],
        parse: impl FnOnce() -> Option<Value>,
    ) -> Option<Arc<Value>> {
        if let Some((_, known)) = self.option_texts.iter().find(|(t, _)| **t == *text) {
            return Some(Arc::clone(known));
        }
        let options = self.options(Arc::new(parse()?));
        if text.len() <= MAX_TEXT {
            if self.option_texts.len() >= MAX_OPTIONS {
                self.option_texts.pop_front();
            }
            self.option_texts
                .push_back((text.into(), Arc::clone(&options)));
        }
        Some(options)
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

    #[test]
    fn texts_already_read_are_not_parsed_again_and_stay_bounded() {
        let mut i = Interner::default();
        let user = || {
            Some(UserInfo {
                username: "alice".into(),
                ..UserInfo::default()
            })
        };
        let a = i.user_text(br#"{"username":"alice"}"#, user).unwrap();
        let b = i
            .user_text(br#"{"username":"alice"}"#, || panic!("parsed again"))
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        // Another spelling of the same user is parsed, and shares the one copy.
        let c = i.user_text(br#"{ "username": "alice" }"#, user).unwrap();
        assert!(Arc::ptr_eq(&a, &c));
        assert!(i.user_text(b"{}", || None).is_none());
        for n in 0..=MAX_USER_TEXTS {
            i.user_text(format!("{n}").as_bytes(), user);
        }
        assert!(i.user_texts.len() <= MAX_USER_TEXTS);

        let create = || Some(serde_json::json!({"kind": "CreateOptions"}));
        let x = i
            .options_text(br#"{"kind":"CreateOptions"}"#, create)
            .unwrap();
        let y = i
            .options_text(br#"{"kind":"CreateOptions"}"#, || panic!("parsed again"))
            .unwrap();
        assert!(Arc::ptr_eq(&x, &y));
        for n in 0..=MAX_OPTIONS {
            i.options_text(format!("{n}").as_bytes(), || Some(serde_json::json!(n)));
        }
        assert_eq!(i.option_texts.len(), MAX_OPTIONS);
    }
}

//! One copy of what the requests of a capture have in common: the requesting users, the options
//! objects and the namespace labels repeat from request to request, so the requests loaded from
//! one capture refer to shared allocations instead of holding a copy each. What is read from
//! JSON text (users, options, kinds, resources) is also found again by that text, so that text
//! repeated from one request to the next is not parsed again.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;

use crate::api::{GroupVersionKind, GroupVersionResource, UserInfo};
use crate::engine::shared_copy;
use crate::replay::{CapturedRequest, NamespaceState};

/// Distinct options objects kept for sharing, most recent last. Captures use few (one per
/// operation, a field manager or two); they are compared by value, so the list stays short.
const MAX_OPTIONS: usize = 16;

/// Texts of users kept for lookup; the map starts over when it is full.
const MAX_USER_TEXTS: usize = 256;

/// Longest text kept for lookup (users and options are a few hundred bytes).
const MAX_TEXT: usize = 4096;

/// Values read from the JSON texts of objects, most recent first, at most `N`: an object's text
/// ends where its brackets close, so a text that begins with a remembered one begins with that
/// very object, and is found without finding its end first.
#[derive(Debug)]
pub(crate) struct Recent<T, const N: usize> {
    entries: VecDeque<(Box<[u8]>, T)>,
}

impl<T, const N: usize> Default for Recent<T, N> {
    fn default() -> Self {
        Recent {
            entries: VecDeque::new(),
        }
    }
}

impl<T, const N: usize> Recent<T, N> {
    /// The value of the remembered object `rest` begins with, and the length of its text.
    pub(crate) fn find(&self, rest: &[u8]) -> Option<(&T, usize)> {
        self.entries
            .iter()
            .find(|(text, _)| rest.starts_with(text))
            .map(|(text, value)| (value, text.len()))
    }

    /// Remembers `value`, read from `text`: the whole text of an object (anything else, or a
    /// text longer than a few kilobytes, is not kept).
    pub(crate) fn remember(&mut self, text: &[u8], value: T) {
        if text.first() != Some(&b'{') || text.last() != Some(&b'}') || text.len() > MAX_TEXT {
            return;
        }
        if self.entries.len() >= N {
            self.entries.pop_back();
        }
        self.entries.push_front((text.into(), value));
    }
}

/// Shares users, options and namespace labels between the requests of a capture.
#[derive(Debug, Default)]
pub struct Interner {
    users: foldhash::HashSet<Arc<UserInfo>>,
    labels: foldhash::HashSet<Arc<BTreeMap<String, String>>>,
    /// The labels last shared: the requests of a capture mostly come from a few namespaces.
    last_labels: Option<Arc<BTreeMap<String, String>>>,
    options: VecDeque<Arc<Value>>,
    user_texts: foldhash::HashMap<Box<[u8]>, Arc<UserInfo>>,
    recent_users: Recent<Arc<UserInfo>, 4>,
    option_texts: Recent<Arc<Value>, MAX_OPTIONS>,
    /// Kinds read from text, shared by the requests that name them alike.
    pub(crate) kinds: Recent<Arc<GroupVersionKind>, 8>,
    /// Resources read from text, shared like the kinds.
    pub(crate) resources: Recent<Arc<GroupVersionResource>, 8>,
    /// Objects found valid JSON, as members of an AdmissionReview's request.
    pub(crate) checked: Recent<(), 8>,
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
        // Labels from the cluster's objects are already a shared copy, most often the last one:
        // no need to hash them again to find it.
        if let Some(last) = &self.last_labels
            && Arc::ptr_eq(last, &labels)
        {
            return labels;
        }
        let shared = shared_copy(&mut self.labels, labels);
        self.last_labels = Some(Arc::clone(&shared));
        shared
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

    /// The shared copy of the user whose JSON text (an object, always found at the same place
    /// in a document) begins `rest`, and the length of that text: the one read before from the
    /// same text, else `parse(length)`'s, `length` being `len()`'s. `None` when either fails.
    pub(crate) fn user_text(
        &mut self,
        rest: &[u8],
        len: impl FnOnce() -> Option<usize>,
        parse: impl FnOnce(usize) -> Option<UserInfo>,
    ) -> Option<(Arc<UserInfo>, usize)> {
        if let Some((known, n)) = self.recent_users.find(rest) {
            return Some((Arc::clone(known), n));
        }
        let n = len()?;
        let text = rest.get(..n)?;
        let user = match self.user_texts.get(text) {
            Some(known) => Arc::clone(known),
            None => {
                let user = self.user(Arc::new(parse(n)?));
                if n <= MAX_TEXT {
                    if self.user_texts.len() >= MAX_USER_TEXTS {
                        self.user_texts.clear();
                    }
                    self.user_texts.insert(text.into(), Arc::clone(&user));
                }
                user
            }
        };
        self.recent_users.remember(text, Arc::clone(&user));
        Some((user, n))
    }

    /// The shared copy of the options object whose JSON text begins `rest` (as for
    /// [`user_text`](Self::user_text)), and the length of that text; `parse` reads both.
    pub(crate) fn options_text(
        &mut self,
        rest: &[u8],
        parse: impl FnOnce() -> Option<(Value, usize)>,
    ) -> Option<(Arc<Value>, usize)> {
        if let Some((known, n)) = self.option_texts.find(rest) {
            return Some((Arc::clone(known), n));
        }
        let (value, n) = parse()?;
        let options = self.options(Arc::new(value));
        self.option_texts
            .remember(rest.get(..n)?, Arc::clone(&options));
        Some((options, n))
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

        let labels =
            |team: &str| Arc::new(BTreeMap::from([("team".to_string(), team.to_string())]));
        let web = i.labels(labels("web"));
        let db = i.labels(labels("db"));
        // The shared copies given back, the last one shared or another, stay the shared copies.
        assert!(Arc::ptr_eq(&i.labels(Arc::clone(&db)), &db));
        assert!(Arc::ptr_eq(&i.labels(Arc::clone(&web)), &web));
        assert!(Arc::ptr_eq(&i.labels(labels("db")), &db));
        assert!(Arc::ptr_eq(&i.labels(labels("web")), &web));

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
        let alice = br#"{"username":"alice"}"#;
        let user = |_| {
            Some(UserInfo {
                username: "alice".into(),
                ..UserInfo::default()
            })
        };
        fn len(t: &[u8]) -> impl FnOnce() -> Option<usize> {
            let n = t.len();
            move || Some(n)
        }
        let (a, n) = i.user_text(alice, len(alice), user).unwrap();
        assert_eq!(n, alice.len());
        // Found again at the start of a longer text, without its end being looked for.
        let rest = [&alice[..], b",\"object\":{}}"].concat();
        let (b, n) = i
            .user_text(
                &rest,
                || panic!("end looked for"),
                |_| panic!("parsed again"),
            )
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(n, alice.len());
        // Another spelling of the same user is parsed, and shares the one copy.
        let spaced = br#"{ "username": "alice" }"#;
        let (c, _) = i.user_text(spaced, len(spaced), user).unwrap();
        assert!(Arc::ptr_eq(&a, &c));
        assert!(i.user_text(b"{}", len(b"{}"), |_| None).is_none());
        // Beyond the few recent ones, the map finds users by their text.
        let numbered = |n: usize| format!(r#"{{"n":{n}}}"#);
        for n in 0..10 {
            let t = numbered(n);
            i.user_text(t.as_bytes(), len(t.as_bytes()), user);
        }
        assert_eq!(i.recent_users.entries.len(), 4);
        let t = numbered(3);
        i.user_text(t.as_bytes(), len(t.as_bytes()), |_| panic!("parsed again"))
            .unwrap();
        for n in 0..=MAX_USER_TEXTS {
            let t = numbered(n + 10);
            i.user_text(t.as_bytes(), len(t.as_bytes()), user);
        }
        assert!(i.user_texts.len() <= MAX_USER_TEXTS);

        let create = br#"{"kind":"CreateOptions"}"#;
        let parsed = || Some((serde_json::json!({"kind": "CreateOptions"}), create.len()));
        let (x, _) = i.options_text(create, parsed).unwrap();
        let (y, n) = i
            .options_text(&[&create[..], b"}"].concat(), || panic!("parsed again"))
            .unwrap();
        assert!(Arc::ptr_eq(&x, &y));
        assert_eq!(n, create.len());
        for n in 0..=MAX_OPTIONS {
            let t = format!(r#"{{"n":{n}}}"#);
            i.options_text(t.as_bytes(), || Some((serde_json::json!(n), t.len())));
        }
        assert_eq!(i.option_texts.entries.len(), MAX_OPTIONS);
    }

    #[test]
    fn only_whole_objects_are_remembered() {
        let mut r: Recent<u8, 2> = Recent::default();
        r.remember(b"\"x\"", 0);
        r.remember(b"{\"a\":1", 0);
        assert!(r.entries.is_empty());
        r.remember(b"{\"a\":1}", 1);
        r.remember(b"{\"a\":2}", 2);
        r.remember(b"{\"a\":3}", 3);
        assert_eq!(r.find(b"{\"a\":3},"), Some((&3, 7)));
        assert_eq!(r.find(b"{\"a\":2}"), Some((&2, 7)));
        assert_eq!(r.find(b"{\"a\":1}"), None);
    }
}
